// A Redis question from a fixture to one of its own servers: a short-lived client that
// never retries or queues, and an answer of undefined when the server cannot answer.
import { Redis } from "ioredis";

export const quickClient = (port: number) =>
  new Redis(port, "127.0.0.1", {
    lazyConnect: true,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
    commandTimeout: 1000,
  });

export async function ask<T>(port: number, question: (client: Redis) => Promise<T>): Promise<T | undefined> {
  const client = quickClient(port);
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
