// What the room store needs from where its data lives: the room scripts (store/redis/lua)
// and a few plain commands. Redis runs them with EVALSHA (redis/redis-store.ts); the
// in-process store on a Lua VM over an in-memory keyspace (memory/memory-store.ts). One
// store class (scripted-store.ts) speaks to either, so a room rule lives in one script.
import type { ScriptName, ScriptReply } from "./redis/scripts.js";

export type Arg = string | number;

export interface ScriptBackend {
  readonly kind: "memory" | "redis";
  /** Runs a script that only reads, or whose writes need no replica's acknowledgement. */
  script<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>>;
  /** Runs a state-changing script; with write-ack on, answers once the replicas have it. */
  change<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>>;
  /** True when change() waits for replicas (a recv then re-reads through change). */
  readonly acknowledgesWrites: boolean;
  /**
   * Wraps one store operation: on Redis its deadline, the storage-format check and the
   * mapping of a lost connection to 503; in process nothing.
   */
  guard<T>(operation: () => Promise<T>): Promise<T>;
  hmget(key: string, ...fields: string[]): Promise<(string | null)[]>;
  zrange(key: string, start: string, stop: string): Promise<string[]>;
  zcount(key: string, min: string, max: string): Promise<number>;
  exists(key: string): Promise<number>;
  setWithExpiry(key: string, value: string, ttlMs: number): Promise<void>;
  get(key: string): Promise<string | null>;
  ping(): Promise<string>;
  close(): Promise<void>;
}
