// The wake-up bus keeps a room's channel subscribed for a while after its last waiter, so
// that looping recvs do not pay an SSUBSCRIBE and an SUNSUBSCRIBE each.
import { Redis } from "ioredis";
import { RedisWakeupBus } from "../../src/realtime/redis-wakeups";
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
});
