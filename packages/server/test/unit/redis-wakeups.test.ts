// The wake-up bus keeps a room's channel subscribed for a while after its last waiter, so
// that looping recvs do not pay an SSUBSCRIBE and an SUNSUBSCRIBE each.
import { Redis } from "ioredis";
import { RESYNC_BATCH, RedisWakeupBus } from "../../src/realtime/redis-wakeups";
import { spawnRedis } from "@duet/testkit";
import { uniquePrefix } from "../support/targets";

const subscribers = async (redis: Redis, channel: string) =>
  Number(((await redis.call("PUBSUB", "SHARDNUMSUB", channel)) as [string, number])[1]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("RedisWakeupBus", () => {
  let subscriber: Redis;
  let redis: Redis;
  beforeAll(() => {
    subscriber = new Redis(process.env.REDIS_URL!);
    redis = new Redis(process.env.REDIS_URL!);
  });
  afterAll(async () => {
    await Promise.all([subscriber.quit(), redis.quit()]);
  });

  it("keeps the channel between waits, still delivers, and unsubscribes after the linger", async () => {
    const prefix = uniquePrefix();
    const channel = `${prefix}room:wake`;
    const bus = new RedisWakeupBus(subscriber, (code) => `${prefix}${code}:wake`, 300);
    const first = await bus.watch("room", () => undefined);
    first();
    expect(bus.channelCount).toBe(1);
    expect(await subscribers(redis, channel)).toBe(1);

    const events: string[] = [];
    const second = await bus.watch("room", (event) => events.push(event));
    await redis.spublish(channel, "a");
    for (const deadline = Date.now() + 2000; events.length === 0 && Date.now() < deadline; ) await sleep(10);
    expect(events).toEqual(["a"]);
    second();

    await sleep(600);
    expect(bus.channelCount).toBe(0);
    expect(await subscribers(redis, channel)).toBe(0);
  });

  it("once closed, sends nothing more: a lingering channel's unsubscribe is not sent on the closed client", async () => {
    const prefix = uniquePrefix();
    const sent: string[] = [];
    // The subscriber's commands, counted: SSUBSCRIBE while open, nothing after close().
    const counting = new Proxy(subscriber, {
      get(target, name, receiver) {
        if (name === "ssubscribe" || name === "sunsubscribe")
          return (...args: unknown[]) => {
            sent.push(String(name));
            return (target[name] as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          };
        return Reflect.get(target, name, receiver);
      },
    });
    const bus = new RedisWakeupBus(counting, (code) => `${prefix}${code}:wake`, 50);
    const stop = await bus.watch("room", () => undefined);
    bus.close();
    stop(); // the last waiter leaves after the close: no linger timer, no SUNSUBSCRIBE
    await new Promise((resolve) => setTimeout(resolve, 200)); // four lingers
    expect(sent).toEqual(["ssubscribe"]);
    expect(bus.channelCount).toBe(0);
    await subscriber.sunsubscribe(`${prefix}room:wake`);
  });
  it("after a reconnect every waiter re-reads, a batch at a time, and one that left before its turn does not", async () => {
    const prefix = uniquePrefix();
    const own = new Redis(process.env.REDIS_URL!);
    const bus = new RedisWakeupBus(own, (code) => `${prefix}${code}:wake`);
    try {
      const waiters = 3 * RESYNC_BATCH;
      const resynced: number[] = [];
      let afterFirstTurn: number | undefined;
      const stops: (() => void)[] = [];
      let allDone!: () => void;
      const done = new Promise<void>((resolve) => (allDone = resolve));
      for (let i = 0; i < waiters; i++) {
        stops.push(
          await bus.watch(`room${i % 3}`, (event) => {
            if (event !== "resync") return;
            if (resynced.length === 0) {
              // The first batch runs in one turn; the rest come in later turns.
              setImmediate(() => (afterFirstTurn = resynced.length));
              stops[waiters - 1]!(); // leaves before its turn
            }
            resynced.push(i);
            if (resynced.length === waiters - 1) allDone();
          }),
        );
      }
      if (own.status !== "ready") await new Promise((resolve) => own.once("ready", resolve));
      own.disconnect(true);
      await done;
      // The one that left is the last of the last batch: a call for it would have come in the
      // same turn as the call that resolved `done`, before this line runs.
      expect(afterFirstTurn).toBe(RESYNC_BATCH);
      expect(new Set(resynced).size).toBe(waiters - 1);
      expect(resynced).not.toContain(waiters - 1);
    } finally {
      bus.close();
      own.disconnect();
    }
  });

  it("a subscription confirmed after the wait for it gave up is live for the next recv, not dropped", async () => {
    // A Redis of its own: CLIENT PAUSE would stall every other test on the shared one.
    const own = await spawnRedis();
    const sub = new Redis(own.url);
    const admin = new Redis(own.url);
    try {
      const bus = new RedisWakeupBus(sub, (code) => `${code}:wake`, 60_000, 100);
      await sub.ping();
      // Redis holds every command for 1 s: the SSUBSCRIBE's confirmation comes after the 100 ms wait.
      await admin.call("CLIENT", "PAUSE", "1000", "ALL");
      await expect(bus.watch("room", () => undefined)).rejects.toMatchObject({ code: "unavailable" });
      // The confirmation arrives once the pause ends; waited for, not timed.
      while (!bus.isListening("room")) await sleep(20);
      const events: string[] = [];
      const stop = await bus.watch("room", (event) => events.push(event));
      await admin.spublish("room:wake", "a");
      while (events.length === 0) await sleep(10);
      expect(events).toEqual(["a"]);
      stop();
      bus.close();
    } finally {
      sub.disconnect();
      admin.disconnect();
      await own.stop("SIGKILL");
    }
  });
});
