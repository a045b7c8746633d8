// The request limit leased from one shared budget (src/http/leased-rate-limit.ts), against a
// real redis-server of its own running lease-tokens-1.lua: stores stand for nodes. The fake
// clock only places the window; every lease is a real script call.
import { Redis } from "ioredis";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import type { ClientRateLimitInfo, Options } from "express-rate-limit";
import { LeasedRedisRateLimitStore } from "../../src/http/leased-rate-limit";
import { RedisKeys } from "../../src/store/redis/keys";

const WINDOW_MS = 60_000;
const ready = (client: Redis) =>
  client.status === "ready" ? Promise.resolve() : new Promise<void>((resolve) => client.once("ready", () => resolve()));

describe("LeasedRedisRateLimitStore", () => {
  let redis: SpawnedRedis;
  const clients: Redis[] = [];
  const stores: LeasedRedisRateLimitStore[] = [];
  let now = 1_800_000_000_000;
  let prefix = 0;

  const node = (client: Redis, keys: RedisKeys, limit: number, maxLease?: number) => {
    const store = new LeasedRedisRateLimitStore(client, keys, "requests", 500, () => now, maxLease);
    store.init({ windowMs: WINDOW_MS, limit } as Options);
    stores.push(store);
    return store;
  };
  const connect = async (url = redis.url) => {
    const client = new Redis(url, {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      ...(url === redis.url ? {} : { retryStrategy: () => 50 }),
    });
    client.on("error", () => undefined);
    clients.push(client);
    await ready(client);
    return client;
  };
  const windowKey = (keys: RedisKeys) => keys.rateLimitWindow("requests", Math.floor(now / WINDOW_MS) * WINDOW_MS);
  const admitted = (infos: ClientRateLimitInfo[], limit: number) => infos.filter((i) => i.totalHits <= limit).length;

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

  it("waits for a lease only when it holds no token; a held token answers at once", async () => {
    const keys = new RedisKeys(`t${prefix++}:`);
    const client = await connect();
    const a = node(client, keys, 100, 4);
    const first = a.increment("1.2.3.4");
    expect(first).toBeInstanceOf(Promise);
    expect((await first).totalHits).toBe(1);
    // The first lease brought a token beyond the call: the next call needs no round trip.
    const second = a.increment("1.2.3.4");
    expect(second).not.toBeInstanceOf(Promise);
    expect((second as ClientRateLimitInfo).totalHits).toBe(2);
    expect((second as ClientRateLimitInfo).resetTime).toEqual(new Date(Math.ceil(now / WINDOW_MS) * WINDOW_MS));
    // What the node took is in Redis, and the key expires after the window.
    await new Promise((r) => setImmediate(r));
    await a.close();
    expect(Number(await client.hget(windowKey(keys), "1.2.3.4"))).toBe(2);
    expect(await client.pttl(windowKey(keys))).toBeGreaterThan(WINDOW_MS);
    expect(await client.pttl(windowKey(keys))).toBeLessThanOrEqual(2 * WINDOW_MS);
  });

  it("two and three nodes given a burst each admit at most the limit together, and at least the limit less a lease per other node", async () => {
    for (const count of [2, 3]) {
      const keys = new RedisKeys(`t${prefix++}:`);
      const LIMIT = 60;
      const LEASE = 4;
      const nodes: LeasedRedisRateLimitStore[] = [];
      for (let i = 0; i < count; i++) nodes.push(node(await connect(), keys, LIMIT, LEASE));
      // Every node is called twice the limit, all at once.
      const answers = await Promise.all(
        Array.from({ length: LIMIT * 2 * count }, (_, i) => nodes[i % count]!.increment("5.6.7.8")),
      );
      const through = admitted(answers, LIMIT);
      expect(through).toBeLessThanOrEqual(LIMIT);
      expect(through).toBeGreaterThanOrEqual(LIMIT - (count - 1) * LEASE);
      expect(Number(await clients[0]!.hget(windowKey(keys), "5.6.7.8"))).toBe(LIMIT);
      // Spent: a node that holds no token refuses at once, without asking Redis again.
      for (const n of nodes) {
        let answer = n.increment("5.6.7.8");
        while (!(answer instanceof Promise) && answer.totalHits <= LIMIT) answer = n.increment("5.6.7.8");
        expect(answer).not.toBeInstanceOf(Promise);
        expect((answer as ClientRateLimitInfo).totalHits).toBe(LIMIT + 1);
      }
    }
  });

  it("a client calling two nodes in turn waits once per node; then a lease call per half lease", async () => {
    const keys = new RedisKeys(`t${prefix++}:`);
    const client = await connect();
    const other = await connect();
    const [a, b] = [node(client, keys, 1000, 8), node(other, keys, 1000, 8)];
    const scripts = async () => {
      const stats = await client.info("commandstats");
      return [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((n, [, calls]) => n + Number(calls), 0);
    };
    const before = await scripts();
    let waited = 0;
    for (let i = 0; i < 100; i++) {
      const [store, connection] = i % 2 ? [a, client] : [b, other];
      const answer = store.increment("9.9.9.9");
      if (answer instanceof Promise) waited++;
      expect((await answer).totalHits).toBeLessThanOrEqual(1000);
      // Whatever lease the call asked for has landed: a PING on the same connection is
      // answered after it (and the lease call goes out on the turn after the call).
      await new Promise((r) => setImmediate(r));
      await connection.ping();
    }
    // Only the first call on each node waited.
    expect(waited).toBe(2);
    // Leases of 2, 4, then 8 topped up at half: about one lease call per 4 calls.
    const leaseCalls = (await scripts()) - before;
    expect(leaseCalls).toBeGreaterThanOrEqual(2 * (3 + 46 / 4 - 1));
    expect(leaseCalls).toBeLessThanOrEqual(2 * (3 + 46 / 4 + 1));
    // Neither node holds more than a lease it has not used.
    const taken = Number(await client.hget(windowKey(keys), "9.9.9.9"));
    expect(taken).toBeGreaterThanOrEqual(100);
    expect(taken).toBeLessThanOrEqual(100 + 2 * 8);
    // A stopping node hands its unused tokens back.
    await a.close();
    await b.close();
    expect(Number(await client.hget(windowKey(keys), "9.9.9.9"))).toBe(100);
  });

  it("a new window starts from a budget of its own", async () => {
    const keys = new RedisKeys(`t${prefix++}:`);
    const a = node(await connect(), keys, 3, 1);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await a.increment("7.7.7.7"));
    expect(answers.map((x) => x.totalHits)).toEqual([1, 2, 3, 4]);
    now += WINDOW_MS;
    expect((await a.increment("7.7.7.7")).totalHits).toBe(1);
  });

  it("with Redis gone each node counts alone, calls stop waiting, and what it admitted is charged once Redis is back", async () => {
    const own = await spawnRedis();
    const keys = new RedisKeys(`t${prefix++}:`);
    const client = await connect(own.url);
    const a = node(client, keys, 10, 1);
    const port = own.port;
    let stopped = false;
    try {
      for (let i = 0; i < 3; i++) expect((await a.increment("4.4.4.4")).totalHits).toBeLessThanOrEqual(10);
      await own.stop();
      stopped = true;
      // The node's own count: the limit on this node alone, never a wait for Redis.
      const alone: ClientRateLimitInfo[] = [];
      for (let i = 0; i < 12; i++) {
        const answer = a.increment("4.4.4.4");
        alone.push(await answer);
        await new Promise((r) => setImmediate(r));
      }
      expect(admitted(alone, 10)).toBe(7);
      expect(alone.at(-1)!.totalHits).toBe(11);
      const back = await spawnRedis([], port);
      try {
        for (let i = 0; i < 100 && client.status !== "ready"; i++) await new Promise((r) => setTimeout(r, 50));
        expect(client.status).toBe("ready");
        // The next call carries the charge; Redis then knows the budget is spent.
        expect((await a.increment("4.4.4.4")).totalHits).toBe(11);
        for (let i = 0; i < 100 && (await client.hget(windowKey(keys), "4.4.4.4")) === null; i++)
          await new Promise((r) => setTimeout(r, 20));
        expect(Number(await client.hget(windowKey(keys), "4.4.4.4"))).toBeGreaterThanOrEqual(7);
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
