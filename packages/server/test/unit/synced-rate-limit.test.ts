// The request limit counted on each node and synced to Redis in batches
// (src/http/synced-rate-limit.ts), against a real redis-server of its own: two stores stand
// for two nodes. The fake clock only places the window; the syncs are real script calls.
import { Redis } from "ioredis";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import type { Options } from "express-rate-limit";
import { SyncedRedisRateLimitStore } from "../../src/http/synced-rate-limit";
import { RedisKeys } from "../../src/store/redis/keys";

const WINDOW_MS = 60_000;
const ready = (client: Redis) =>
  client.status === "ready" ? Promise.resolve() : new Promise<void>((resolve) => client.once("ready", () => resolve()));
const options = { windowMs: WINDOW_MS } as Options;

describe("SyncedRedisRateLimitStore", () => {
  let redis: SpawnedRedis;
  const clients: Redis[] = [];
  const stores: SyncedRedisRateLimitStore[] = [];
  let now = 1_800_000_000_000;
  let prefix = 0;

  const node = (client: Redis, keys: RedisKeys) => {
    const store = new SyncedRedisRateLimitStore(client, keys, "requests", 60_000, 500, () => now);
    store.init(options);
    stores.push(store);
    return store;
  };
  const connect = () => {
    const client = new Redis(redis.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
    client.on("error", () => undefined);
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    redis = await spawnRedis();
  });
  afterAll(async () => {
    for (const store of stores) await store.close().catch(() => undefined);
    await Promise.all(clients.map((client) => (client.status === "ready" ? client.quit() : client.disconnect())));
    await redis?.stop();
  });
  beforeEach(() => {
    now = Math.floor(now / WINDOW_MS) * WINDOW_MS + WINDOW_MS + 1000;
  });

  it("counts without a round trip, and two nodes' counts add up after a sync", async () => {
    const keys = new RedisKeys(`t${prefix++}:`);
    const client = connect();
    await ready(client);
    const other = connect();
    await ready(other);
    const [a, b] = [node(client, keys), node(other, keys)];
    for (let i = 0; i < 5; i++) a.increment("1.2.3.4");
    for (let i = 0; i < 3; i++) b.increment("1.2.3.4");
    b.increment("5.6.7.8");
    // Answered at once from the node's own count.
    expect(a.increment("1.2.3.4")).toEqual({
      totalHits: 6,
      resetTime: new Date(Math.ceil(now / WINDOW_MS) * WINDOW_MS),
    });
    await a.sync();
    await b.sync();
    // A sync answers the totals of every node for the addresses it carried.
    expect(b.get("1.2.3.4")?.totalHits).toBe(9);
    expect(b.get("5.6.7.8")?.totalHits).toBe(1);
    expect(a.get("1.2.3.4")?.totalHits).toBe(6);
    expect(a.increment("1.2.3.4").totalHits).toBe(7);
    await a.sync();
    expect(a.get("1.2.3.4")?.totalHits).toBe(10);
    // One hash per window in Redis, keyed by client, expiring after the window.
    const key = keys.rateLimitWindow("requests", Math.floor(now / WINDOW_MS) * WINDOW_MS);
    expect(await client.hgetall(key)).toEqual({ "1.2.3.4": "10", "5.6.7.8": "1" });
    expect(await client.pttl(key)).toBeGreaterThan(WINDOW_MS);
    expect(await client.pttl(key)).toBeLessThanOrEqual(2 * WINDOW_MS);
  });

  it("a new window starts from zero; the old window's last hits still reach Redis", async () => {
    const keys = new RedisKeys(`t${prefix++}:`);
    const client = connect();
    await ready(client);
    const a = node(client, keys);
    const first = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    for (let i = 0; i < 4; i++) a.increment("9.9.9.9");
    now += WINDOW_MS;
    expect(a.increment("9.9.9.9").totalHits).toBe(1);
    await a.sync();
    expect(await client.hget(keys.rateLimitWindow("requests", first), "9.9.9.9")).toBe("4");
    expect(await client.hget(keys.rateLimitWindow("requests", first + WINDOW_MS), "9.9.9.9")).toBe("1");
  });

  it("with Redis gone a sync fails quietly, the node keeps counting, and the hits arrive once Redis is back", async () => {
    const own = await spawnRedis();
    const keys = new RedisKeys(`t${prefix++}:`);
    const client = new Redis(own.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 50 });
    client.on("error", () => undefined);
    clients.push(client);
    await ready(client);
    const a = node(client, keys);
    const port = own.port;
    let stopped = false;
    try {
      for (let i = 0; i < 3; i++) a.increment("4.4.4.4");
      await own.stop();
      stopped = true;
      for (let i = 0; i < 3; i++) a.increment("4.4.4.4");
      await expect(a.sync()).resolves.toBeUndefined();
      expect(a.increment("4.4.4.4").totalHits).toBe(7);
      const back = await spawnRedis([], port);
      try {
        for (let i = 0; i < 100 && client.status !== "ready"; i++) await new Promise((r) => setTimeout(r, 50));
        await a.sync();
        const start = Math.floor(now / WINDOW_MS) * WINDOW_MS;
        expect(await client.hget(keys.rateLimitWindow("requests", start), "4.4.4.4")).toBe("7");
        expect(a.get("4.4.4.4")?.totalHits).toBe(7);
      } finally {
        await a.close();
        await client.quit();
        await back.stop();
      }
    } finally {
      if (!stopped) await own.stop();
    }
  });
});
