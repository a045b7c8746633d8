// The storage format: which layout of keys and fields the data under a key prefix is in
// (docs/redis.md §6). The first node to start on an empty prefix records the format it
// writes; every node checks it before it serves anything from Redis, so that a node never
// runs its scripts on data whose layout it does not know.
import { setTimeout as delay } from "node:timers/promises";
import { ReplyError } from "ioredis";
import type { RedisClient } from "./connection.js";
import { RedisKeys } from "./keys.js";
import { TRANSIENT_REPLY } from "./refusals.js";

/**
 * The format this code reads and writes. Raised only by a change that nodes of the
 * previous release could not run beside (docs/redis.md §6): such a release needs a drain.
 */
export const STORAGE_FORMAT = 1;

/** The prefix holds data in a format this node does not know: it must not start. */
export class StorageFormatError extends Error {
  constructor(
    readonly key: string,
    readonly found: string,
  ) {
    super(
      `Redis holds storage format "${found}" at ${key}; this relay reads and writes format ${STORAGE_FORMAT} only. ` +
        "Run the release that writes that format, or upgrade as docs/redis.md §6 says (drain the old nodes, then a new REDIS_KEY_PREFIX or an emptied one).",
    );
    this.name = "StorageFormatError";
  }
}

const closedError = () => new Error("The Redis connection closed before the storage format could be read.");
const whenReady = (client: RedisClient) =>
  client.status === "ready"
    ? Promise.resolve()
    : client.status === "end"
      ? Promise.reject(closedError())
      : new Promise<void>((resolve, reject) => {
          const onReady = () => {
            client.off("end", onEnd);
            resolve();
          };
          const onEnd = () => {
            client.off("ready", onReady);
            reject(closedError());
          };
          client.once("ready", onReady).once("end", onEnd);
        });

/**
 * Records STORAGE_FORMAT under the prefix when none is recorded (SET NX: the first node on an
 * empty prefix), then reads the recorded one back. Resolves when it is STORAGE_FORMAT;
 * rejects with StorageFormatError when it is any other, and with Redis's own error when
 * Redis refuses the commands (an ACL, say). Waits for the connection to be ready first (the
 * relay's connections have no offline queue), and again after a connection that dropped.
 */
export async function ensureStorageFormat(client: RedisClient, keyPrefix: string): Promise<void> {
  const key = new RedisKeys(keyPrefix).format();
  for (;;) {
    await whenReady(client);
    let found: string | null;
    try {
      // GET first: a full Redis (OOM, noeviction) refuses SET even when the key is there.
      found = await client.get(key);
      if (found === null) {
        await client.set(key, String(STORAGE_FORMAT), "NX");
        found = await client.get(key);
      }
    } catch (error) {
      // A refusal for now (full, read-only during a failover, loading, a cluster healing)
      // is waited out like a dropped connection; a lasting one (an ACL) is final.
      if (error instanceof ReplyError && !TRANSIENT_REPLY.test((error as Error).message)) throw error;
      await delay(100);
      continue;
    }
    if (found === String(STORAGE_FORMAT)) return;
    // Gone between the two commands (deleted by hand, a Redis restarted empty): claim it again.
    if (found === null) continue;
    throw new StorageFormatError(key, found);
  }
}
