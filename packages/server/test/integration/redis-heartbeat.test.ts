// The connections' heartbeat: a Redis that hangs (SIGSTOP) keeps the idle subscriber's
// socket open for ever, and nothing else would notice. The heartbeat PINGs it and drops the
// connection when no answer comes, so the client reconnects (with Sentinel: to whichever
// master Sentinel names) and the wake-up bus resubscribes. The command and write-ack
// connections get it too: a command timeout fails the command, not the connection, and a
// connection left to TCP's retransmission backoff after a partition serves again only
// seconds after the network has healed.
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import type { Redis } from "ioredis";
import { createRedisConnections, type RedisConnections } from "../../src/store/redis/connection";

const until = async (condition: () => boolean, withinMs: number, what: string) => {
  for (const deadline = Date.now() + withinMs; !condition(); await new Promise((r) => setTimeout(r, 25))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
  }
};

describe("subscriber heartbeat", () => {
  let redis: SpawnedRedis;
  let connections: RedisConnections;
  beforeEach(async () => {
    redis = await spawnRedis();
    connections = createRedisConnections({ url: redis.url, tls: false, commandTimeoutMs: 500, writeAckReplicas: 1 });
    for (const c of [connections.commands, connections.subscriber, connections.acked!]) c.on("error", () => undefined);
  });
  afterEach(async () => {
    connections.stop();
    connections.commands.disconnect();
    connections.subscriber.disconnect();
    connections.acked?.disconnect();
    redis.process.kill("SIGCONT");
    await redis.stop("SIGKILL");
  });

  it("answers PINGs while subscribed, drops the connection of a hung Redis, and is back once it resumes", async () => {
    const subscriber = connections.subscriber as Redis;
    await until(() => subscriber.status === "ready", 5000, "subscriber ready");
    await subscriber.ssubscribe("duet-test-channel");
    // In subscriber mode PING is allowed and answered: the heartbeat itself does not break it.
    await expect(subscriber.ping()).resolves.toBeDefined();
    let reconnects = 0;
    subscriber.on("reconnecting", () => reconnects++);
    redis.process.kill("SIGSTOP");
    // Nothing is outstanding on this connection: only the heartbeat can notice.
    await until(() => reconnects > 0, 10_000, "heartbeat dropped the hung connection");
    redis.process.kill("SIGCONT");
    await until(() => subscriber.status === "ready", 10_000, "subscriber back");
    await expect(subscriber.ping()).resolves.toBeDefined();
  }, 30_000);

  it("drops the command and write-ack connections of a hung Redis too, with no command outstanding", async () => {
    const clients = [connections.commands as Redis, connections.acked as Redis];
    await until(() => clients.every((c) => c.status === "ready"), 5000, "connections ready");
    const reconnects = [0, 0];
    clients.forEach((client, i) => {
      client.on("reconnecting", () => {
        reconnects[i]!++;
      });
    });
    redis.process.kill("SIGSTOP");
    await until(() => reconnects.every((n) => n > 0), 10_000, "heartbeat dropped both hung connections");
    redis.process.kill("SIGCONT");
    await until(() => clients.every((c) => c.status === "ready"), 10_000, "connections back");
    await expect(connections.commands.ping()).resolves.toBe("PONG");
  }, 30_000);

  it("without it (stopped, as at shutdown) the hung Redis goes unnoticed: the heartbeat is what notices", async () => {
    const subscriber = connections.subscriber as Redis;
    await until(() => subscriber.status === "ready", 5000, "subscriber ready");
    connections.stop();
    let reconnects = 0;
    subscriber.on("reconnecting", () => reconnects++);
    redis.process.kill("SIGSTOP");
    // Four heartbeat periods and more than three PING timeouts.
    await new Promise((r) => setTimeout(r, 4000));
    expect(reconnects).toBe(0);
    expect(subscriber.status).toBe("ready");
  }, 30_000);
});
