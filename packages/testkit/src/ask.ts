// A Redis question from a fixture to one of its own servers: a short-lived client that
// never retries or queues, and an answer of undefined when the server cannot answer. A
// server is reached at a loopback port, or at a Unix socket path (a server in a network
// namespace: a path in the filesystem reaches into any namespace, and no partition cuts it).
import { Redis } from "ioredis";

/** Where the test process reaches a server it started: a loopback port or a Unix socket path. */
export type RedisAt = number | string;

const QUICK = {
  lazyConnect: true,
  enableOfflineQueue: true,
  maxRetriesPerRequest: 0,
  retryStrategy: () => null,
  connectTimeout: 1000,
  commandTimeout: 1000,
};

export const quickClient = (at: RedisAt) =>
  typeof at === "number" ? new Redis(at, "127.0.0.1", QUICK) : new Redis({ ...QUICK, path: at });

export async function ask<T>(at: RedisAt, question: (client: Redis) => Promise<T>): Promise<T | undefined> {
  const client = quickClient(at);
  client.on("error", () => undefined);
  try {
    await client.connect();
    return await question(client);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}
