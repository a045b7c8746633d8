// The Redis store: rooms as hashes with TTLs, pending messages in lists, one Lua script per
// atomic operation, run with EVALSHA (ioredis's defined commands). The store's logic is
// scripted-store.ts, shared with the in-process store; this is how it reaches Redis: each
// call's deadline, write-ack, and the connections.
import { within } from "../../deadline.js";
import type { RoomLifetimes, StoreBudget, WakeupBus } from "../room-store.js";
import type { Arg, ScriptBackend } from "../script-backend.js";
import { ScriptedRoomStore } from "../scripted-store.js";
import { closeConnection, type RedisClient } from "./connection.js";
import { Refusal, refused, storeFailure } from "./refusals.js";
import { patience, type ReplyClock } from "./reply-clock.js";
import { defineScripts, type ScriptName, type ScriptReply } from "./scripts.js";
import { WriteAcknowledger, type WriteAck } from "./write-ack.js";
import { REDIS_DEFAULTS } from "../../config.js";

export { Refusal, refused, storeFailure };

export interface RedisStoreOptions {
  client: RedisClient;
  /** The wake-up bus's connection, closed with the store. */
  subscriber?: RedisClient;
  wakeups: WakeupBus;
  keyPrefix: string;
  lifetimes: RoomLifetimes;
  /**
   * Longest time one store operation may take before it answers 503. ioredis's own
   * commandTimeout starts when a command is written, and auto-pipelining holds a command
   * until the pipeline before it settles, so alone it allows twice its value.
   */
  operationTimeoutMs?: number;
  /** Off when absent (or replicas 0): a change answers once the master has it. */
  writeAck?: WriteAck;
  /** When Redis last answered on the command connections: a call on a live link waits on (patience). */
  replies?: ReplyClock;
  /** Settles once the storage format is checked (format-version.ts): until then every call answers 503. */
  formatChecked?: Promise<void>;
  /** Called once on close (stops the subscriber's heartbeat). */
  onClose?: () => void;
  /** Live rooms per owner (roomsPerOwner); maxBytes does not apply (Redis's maxmemory does). */
  budget?: StoreBudget;
}

class RedisBackend implements ScriptBackend {
  readonly kind = "redis" as const;
  readonly acknowledgesWrites: boolean;
  private readonly client: RedisClient;
  private readonly subscriber?: RedisClient;
  private readonly operationTimeoutMs: number;
  private readonly writeAck?: WriteAcknowledger;
  private readonly extend?: (waitedMs: number) => number;
  private formatKnown: boolean;

  constructor(options: RedisStoreOptions) {
    const ack = options.writeAck;
    this.writeAck = ack && ack.replicas !== 0 ? new WriteAcknowledger(ack) : undefined;
    this.acknowledgesWrites = this.writeAck !== undefined;
    this.operationTimeoutMs = options.operationTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs;
    this.extend = options.replies && patience(options.replies, this.operationTimeoutMs);
    this.formatKnown = options.formatChecked === undefined;
    options.formatChecked?.then(
      () => (this.formatKnown = true),
      () => undefined,
    );
    this.client = options.client;
    this.subscriber = options.subscriber;
    defineScripts(this.client);
  }

  guard<T>(operation: () => Promise<T>): Promise<T> {
    // Never a script on data whose layout this node does not know (docs/redis.md §6).
    if (!this.formatKnown) return Promise.reject(storeFailure(new Error("storage format not yet checked")));
    // One promise and one timer per operation (every room call runs one). An abandoned
    // operation may still settle later, into the void: its outcome is unknown to the client
    // (a 503), which is why sends carry idempotency keys.
    return within(
      operation,
      this.operationTimeoutMs,
      () => {
        throw storeFailure(new Error("store operation timed out"));
      },
      { mapError: storeFailure, extend: this.extend },
    );
  }

  script<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>> {
    // The command is typed by SCRIPTS (scripts.ts); TypeScript cannot narrow a client's
    // commands by a generic name, so this restates that type, it does not choose one.
    return (this.client[name] as (...a: Arg[]) => Promise<ScriptReply<N>>).apply(this.client, args);
  }

  /** With write-ack on, answers once the replicas have the change (write-ack.ts). */
  change<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>> {
    if (!this.writeAck) return this.script(name, args);
    return this.writeAck.change(name, args);
  }

  hmget(key: string, ...fields: string[]): Promise<(string | null)[]> {
    return this.client.hmget(key, ...fields);
  }
  zrange(key: string, start: string, stop: string): Promise<string[]> {
    return this.client.zrange(key, start, stop);
  }
  zcount(key: string, min: string, max: string): Promise<number> {
    return this.client.zcount(key, min, max);
  }
  exists(key: string): Promise<number> {
    return this.client.exists(key);
  }
  async setWithExpiry(key: string, value: string, ttlMs: number): Promise<void> {
    await this.client.set(key, value, "PX", ttlMs);
  }
  get(key: string): Promise<string | null> {
    return this.client.get(key);
  }
  ping(): Promise<string> {
    return this.client.ping();
  }

  async close(): Promise<void> {
    const connections = [this.client, this.subscriber, this.writeAck?.ack.client].filter(
      (c): c is RedisClient => c !== undefined,
    );
    // disconnect() after quit(): with Sentinel only disconnect() closes the failover
    // detector's connections to the sentinels.
    await Promise.all(connections.map(closeConnection));
  }
}

export class RedisRoomStore extends ScriptedRoomStore {
  private readonly onClose?: () => void;

  constructor(options: RedisStoreOptions) {
    super({ ...options, backend: new RedisBackend(options) });
    this.onClose = options.onClose;
  }

  override async close(): Promise<void> {
    this.onClose?.();
    await super.close();
  }
}
