// The Redis store: rooms as hashes with TTLs, pending messages in lists, one Lua script per
// atomic operation. The scripts are the truth; pub/sub only wakes waiting recvs.
import { ReplyError } from "ioredis";
import {
  MAX_PENDING_BYTES,
  MAX_PENDING_MESSAGES,
  PEER_ACTIVE_WINDOW_MS,
  type Message,
  type Seat,
} from "@duet/protocol";
import { ApiError, apiError } from "../../errors.js";
import { hashSeatToken, mintRoomCode, mintSeatToken } from "../credentials.js";
import type {
  InboxSnapshot,
  RoomLifetimes,
  RoomStatus,
  RoomStore,
  SeatCredentials,
  SeatGrant,
  SendInput,
  StoreTally,
  WakeupBus,
} from "../room-store.js";
import type { RedisClient } from "./connection.js";
import { RedisKeys } from "./keys.js";
import { defineScripts } from "./scripts.js";

// Status codes the scripts return, turned into the catalogue's errors in one place.
const SCRIPT_FAILURES: Record<number, () => ApiError> = {
  [-404]: () => apiError("not_found"),
  [-401]: () => apiError("unauthorized", "This token does not hold a seat in this room."),
  [-429]: () => apiError("mailbox_full"),
  [-400]: () => apiError("e2e_required"),
};

function failureOf(status: number, conflict: () => ApiError): Error {
  if (status === -409) return conflict();
  const make = SCRIPT_FAILURES[status];
  return make ? make() : new Error(`unexpected script status ${status}`);
}

// Replies that mean "Redis cannot serve right now", as opposed to a bug in a script.
// OOM: with maxmemory-policy noeviction a full Redis refuses writes until rooms expire.
const TRANSIENT_REPLY = /^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY|BUSY|NOREPLICAS|MOVED|ASK|OOM)\b/;

/** Connection loss, timeouts and transient replies become 503; script bugs stay 500. */
export function storeFailure(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  if (error instanceof ReplyError && !TRANSIENT_REPLY.test((error as Error).message)) return error;
  const unavailable = apiError("unavailable");
  unavailable.retryAfterSeconds = 1;
  return unavailable;
}

const seatOf = (value: unknown): Seat => (value === "b" ? "b" : "a");

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
}

export class RedisRoomStore implements RoomStore {
  readonly kind = "redis" as const;
  readonly wakeups: WakeupBus;
  readonly keys: RedisKeys;
  private readonly client: RedisClient;
  private readonly subscriber?: RedisClient;
  private readonly idleMs: number;
  private readonly maxMs: number;
  private readonly operationTimeoutMs: number;

  constructor(options: RedisStoreOptions) {
    this.operationTimeoutMs = options.operationTimeoutMs ?? 1500;
    this.client = options.client;
    this.subscriber = options.subscriber;
    this.wakeups = options.wakeups;
    this.keys = new RedisKeys(options.keyPrefix);
    this.idleMs = options.lifetimes.idleMs;
    this.maxMs = options.lifetimes.maxMs;
    defineScripts(this.client);
  }

  private async run<T>(operation: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const work = operation();
    // An abandoned operation may still settle later: its outcome is unknown to the client
    // (a 503), which is why sends carry idempotency keys.
    work.catch(() => undefined);
    try {
      return await Promise.race([
        work,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("store operation timed out")), this.operationTimeoutMs))),
      ]);
    } catch (error) {
      throw storeFailure(error);
    } finally {
      clearTimeout(timer);
    }
  }

  openRoom(options: { e2e?: boolean } = {}): Promise<SeatGrant> {
    return this.run(async () => {
      // 60-bit codes collide about never; the script still refuses a code in use.
      for (;;) {
        const code = mintRoomCode();
        const token = mintSeatToken();
        const expiresInMs = await this.client.duetOpen(...this.keys.room(code), this.keys.tallyFor(code), hashSeatToken(token), this.idleMs, this.maxMs, options.e2e ? "1" : "0");
        if (expiresInMs >= 0) return { code, seat: "a", token, expiresInMs, e2e: options.e2e === true };
      }
    });
  }

  joinRoom(code: string): Promise<SeatGrant> {
    return this.run(async () => {
      const token = mintSeatToken();
      const reply = await this.client.duetJoin(...this.keys.room(code), this.keys.tallyFor(code), hashSeatToken(token), this.idleMs);
      if (typeof reply === "number") throw failureOf(reply, () => apiError("full"));
      return { code, seat: "b", token, expiresInMs: Number(reply[0]), e2e: Number(reply[1]) === 1 };
    });
  }

  sendMessage(input: SendInput): Promise<{ id: string; replayed: boolean }> {
    return this.run(async () => {
      const [status, id] = await this.client.duetSend(
        ...this.keys.room(input.code),
        this.keys.tallyFor(input.code),
        input.tokenHash,
        this.idleMs,
        input.text,
        input.idempotencyKey ?? "",
        input.textDigest ?? "",
        MAX_PENDING_MESSAGES,
        MAX_PENDING_BYTES,
        this.keys.wakeChannel(input.code),
        input.envelope ? "1" : "0",
      );
      if (status < 0) throw failureOf(status, () => apiError("idempotency_conflict"));
      return { id: id!, replayed: status === 1 };
    });
  }

  readInbox(seat: SeatCredentials, touch: boolean): Promise<InboxSnapshot> {
    return this.run(async () => {
      const reply = await this.client.duetRecv(...this.keys.room(seat.code), seat.tokenHash, this.idleMs, touch ? "1" : "0");
      if (typeof reply[0] === "number") throw failureOf(reply[0], () => apiError("internal"));
      const mine = seatOf(reply[0]);
      const from: Seat = mine === "a" ? "b" : "a";
      const messages: Message[] = [];
      for (let i = 2; i < reply.length; i += 2) messages.push({ id: String(reply[i]), from, text: String(reply[i + 1]) });
      return { seat: mine, messages, expiresInMs: Number(reply[1]) };
    });
  }

  ackMessages(seat: SeatCredentials, ids: string[]): Promise<{ acked: number }> {
    return this.run(async () => {
      const status = await this.client.duetAck(...this.keys.room(seat.code), seat.tokenHash, this.idleMs, ...ids);
      if (status < 0) throw failureOf(status, () => apiError("internal"));
      return { acked: status };
    });
  }

  getStatus(seat: SeatCredentials): Promise<RoomStatus> {
    return this.run(async () => {
      const reply = await this.client.duetStatus(...this.keys.room(seat.code), seat.tokenHash, this.idleMs, PEER_ACTIVE_WINDOW_MS);
      if (typeof reply[0] === "number") throw failureOf(reply[0], () => apiError("internal"));
      const [mine, expiresInMs, peerJoined, peerActive, pendingIn, pendingOut, e2e] = reply;
      return {
        seat: seatOf(mine),
        members: Number(peerJoined) === 1 ? ["a", "b"] : ["a"],
        expiresInMs: Number(expiresInMs),
        peerJoined: Number(peerJoined) === 1,
        peerActive: Number(peerActive) === 1,
        pendingIn: Number(pendingIn),
        pendingOut: Number(pendingOut),
        e2e: Number(e2e) === 1,
      };
    });
  }

  closeRoom(seat: SeatCredentials, force: boolean): Promise<void> {
    return this.run(async () => {
      const status = await this.client.duetClose(...this.keys.room(seat.code), this.keys.tallyFor(seat.code), seat.tokenHash, this.idleMs, force ? "1" : "0", this.keys.wakeChannel(seat.code));
      if (status < 0) throw failureOf(status, () => apiError("unread"));
    });
  }

  getStats(): Promise<StoreTally> {
    return this.run(async () => {
      // Two commands per tag; auto-pipelining sends them together (grouped per node in a
      // cluster). Callers cache the result (see CachedTally): this is not per-request work.
      const now = Date.now();
      const rows = await Promise.all(
        this.keys.allTallies().map(({ tally, live }) =>
          Promise.all([this.client.hmget(tally, "sessions", "paired", "messages", "bytes", "closed"), this.client.zcount(live, `(${now}`, "+inf")]),
        ),
      );
      const totals: StoreTally = { sessions: 0, paired: 0, messages: 0, bytes: 0, closed: 0, roomsOpen: 0 };
      for (const [[sessions, paired, messages, bytes, closed], open] of rows) {
        totals.sessions += Number(sessions ?? 0);
        totals.paired += Number(paired ?? 0);
        totals.messages += Number(messages ?? 0);
        totals.bytes += Number(bytes ?? 0);
        totals.closed += Number(closed ?? 0);
        totals.roomsOpen += open;
      }
      return totals;
    });
  }

  describeRoom(code: string): Promise<{ e2e: boolean } | undefined> {
    return this.run(async () => {
      const [seatA, e2e] = await this.client.hmget(this.keys.room(code)[0], "ta", "e2e");
      return seatA === null ? undefined : { e2e: e2e !== null };
    });
  }

  async isReady(): Promise<boolean> {
    try {
      return (await this.run(() => this.client.ping())) === "PONG";
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.wakeups.stop?.();
    const connections = this.subscriber ? [this.client, this.subscriber] : [this.client];
    await Promise.all(connections.map((connection) => connection.quit().catch(() => connection.disconnect())));
  }
}
