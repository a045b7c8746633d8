// Redis connection behaviour, chosen on purpose: while Redis is unreachable every request
// fails fast with 503 unavailable (none hangs), and the node recovers by itself when Redis
// returns. Also graceful shutdown: SIGTERM answers waiting recvs and exits cleanly.
import { Redis } from "ioredis";
import { spawnRedis } from "@duet/testkit";
import { startTarget, type RelayTarget } from "../support/targets";
import { ownRedis } from "../support/own-redis";

const timed = async <T>(work: Promise<T>) => {
  const started = Date.now();
  const result = await work;
  return { result, ms: Date.now() - started };
};

async function untilReady(target: RelayTarget, withinMs: number): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < withinMs) {
    if ((await target.client.call("GET", "/readyz")).status === 200) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not ready within ${withinMs} ms`);
}

describe("Redis unreachable", () => {
  const own = ownRedis({ env: { REDIS_COMMAND_TIMEOUT_MS: "1000" }, each: true });

  it("Redis process gone: every call answers 503 unavailable at once; the node recovers by itself when it returns", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    const waiting = timed(client.recv(room.code, room.b, 20_000));
    await new Promise((r) => setTimeout(r, 200));
    await own.redis.stop("SIGKILL");
    for (const call of [
      client.open(),
      client.join(room.code),
      client.send(room.code, room.a, "x"),
      client.status(room.code, room.a),
      client.stats(),
    ]) {
      const { result, ms } = await timed(call);
      expect({ status: result.status, error: result.body.error }).toEqual({ status: 503, error: "unavailable" });
      expect(result.headers.get("retry-after")).toBe("1");
      expect(ms).toBeLessThan(1500);
    }
    expect((await client.call("GET", "/readyz")).status).toBe(503);
    // The waiting recv is not left hanging past its wait plus a margin.
    const { result: recvReply, ms: recvMs } = await waiting;
    expect([200, 503]).toContain(recvReply.status);
    expect(recvMs).toBeLessThan(22_000);

    const restarted = await spawnRedis([], own.redis.port);
    own.redis = restarted;
    const recoveredIn = await untilReady(own.target, 5000);
    expect(recoveredIn).toBeLessThan(2000);
    expect((await client.open()).status).toBe(200);
  }, 120_000);

  it("Redis frozen (SIGSTOP, a black hole): calls answer 503 within the command timeout; all is well after SIGCONT", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    own.redis.process.kill("SIGSTOP");
    try {
      const replies = await Promise.all(
        [client.send(room.code, room.a, "x"), client.status(room.code, room.a), client.open()].map(timed),
      );
      for (const { result, ms } of replies) {
        expect(result.status).toBe(503);
        expect(ms).toBeLessThan(1000 + 1500);
      }
    } finally {
      own.redis.process.kill("SIGCONT");
    }
    await untilReady(own.target, 5000);
    expect((await client.send(room.code, room.a, "after")).status).toBe(200);
  }, 120_000);
});

describe("graceful shutdown", () => {
  it("SIGTERM with 100 waiting recvs: all answered 200 with an empty list at once, none errored, exit 0", async () => {
    // A drain of 15 s and recvs of 25 s: answered "at once" (within 10 s) is told from both,
    // however busy the machine (timed from the SIGTERM, not from each recv's start).
    const target = await startTarget("process", { REDIS_URL: process.env.REDIS_URL!, SHUTDOWN_DRAIN_SECONDS: "15" });
    const admin = new Redis(process.env.REDIS_URL!);
    try {
      const { client, config } = target;
      const rooms = await Promise.all(Array.from({ length: 100 }, () => client.pairedRoom()));
      const waiting = rooms.map((room) => client.recv(room.code, room.b, 25_000));
      const subscribed = async () =>
        ((await admin.call("PUBSUB", "SHARDCHANNELS", `${config.redis!.keyPrefix}*`)) as string[]).length;
      for (const deadline = Date.now() + 10_000; (await subscribed()) < 100 && Date.now() < deadline; )
        await new Promise((r) => setTimeout(r, 50));
      expect(await subscribed()).toBe(100);
      const exited = new Promise<number | null>((resolve) => target.process!.once("exit", resolve));
      const signalledAt = Date.now();
      target.process!.kill("SIGTERM");
      const results = await Promise.all(
        waiting.map((recv) => recv.then((result) => ({ result, ms: Date.now() - signalledAt }))),
      );
      for (const { result, ms } of results) {
        expect(result.status).toBe(200);
        expect(result.body).toEqual({ messages: [] });
        expect(ms).toBeLessThan(10_000);
      }
      expect(await exited).toBe(0);
      expect(target.logs()).toContain('"msg":"stopped"');
    } finally {
      admin.disconnect();
      await target.close();
    }
  }, 120_000);
});

describe("rate-limit store failures", () => {
  it("a Redis that refuses SCRIPT LOAD lets calls through (fail open) and never takes the process down", async () => {
    const redis = await spawnRedis(["--rename-command", "SCRIPT", ""]);
    const target = await startTarget("process", {
      REDIS_URL: redis.url,
      RATE_LIMIT_REQUESTS: "100",
      RATE_LIMIT_ROOMS: "100",
    });
    try {
      for (let i = 0; i < 5; i++) expect((await target.client.open()).status).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
      expect(target.process!.exitCode).toBeNull();
      expect((await target.client.call("GET", "/readyz")).status).toBe(200);
    } finally {
      await target.close();
      await redis.stop();
    }
  });
});
