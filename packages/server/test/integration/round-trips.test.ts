// Redis round trips per operation, counted by Redis itself (INFO commandstats) on a Redis
// of this test's own. These are the figures in docs/redis.md §4.
import { Redis } from "ioredis";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import { startTarget, type RelayTarget } from "../support/targets";

let redis: SpawnedRedis;
let admin: Redis;
let monitor: Redis;
let target: RelayTarget;

// MONITOR shows every command a client sent; commands a script ran inside Redis carry the
// source "lua" and are not round trips.
let seen: string[] = [];

/** Top-level commands the relay sent to Redis while work ran, by name. */
async function countDuring(work: () => Promise<unknown>): Promise<Record<string, number>> {
  await new Promise((r) => setTimeout(r, 50));
  seen = [];
  await work();
  await new Promise((r) => setTimeout(r, 50));
  const counts: Record<string, number> = {};
  for (const name of seen) counts[name] = (counts[name] ?? 0) + 1;
  return counts;
}

const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

beforeAll(async () => {
  redis = await spawnRedis();
  admin = new Redis(redis.url);
  monitor = await admin.monitor();
  monitor.on("monitor", (_time: string, args: string[], source: string) => {
    if (source !== "lua") seen.push(args[0]!.toLowerCase());
  });
  target = await startTarget("redis", { REDIS_URL: redis.url });
});
afterAll(async () => {
  await target?.close();
  monitor?.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

describe("Redis round trips per operation (rate limits off)", () => {
  const figures: Record<string, Record<string, number>> = {};
  afterAll(() => {
    // eslint-disable-next-line no-console
    console.log(`Redis commands per operation:\n${Object.entries(figures).map(([op, c]) => `  ${op}: ${JSON.stringify(c)}`).join("\n")}`);
  });

  it("open, join, send, ack, status and close are one script call each", async () => {
    const { client } = target;
    let code = "";
    let a = "";
    let b = "";
    figures.open = await countDuring(async () => {
      const opened = (await client.open()).body;
      code = opened.code;
      a = opened.token;
    });
    figures.join = await countDuring(async () => (b = (await client.join(code)).body.token));
    let id = "";
    figures.send = await countDuring(async () => (id = (await client.send(code, a, "hello")).body.id));
    figures["recv (finds messages)"] = await countDuring(() => client.recv(code, b, 25_000));
    figures.ack = await countDuring(() => client.ack(code, b, [id]));
    figures.status = await countDuring(() => client.status(code, a));
    figures.close = await countDuring(() => client.close(code, a));
    for (const op of ["open", "join", "send", "recv (finds messages)", "ack", "status", "close"]) {
      expect({ op, commands: total(figures[op]!) }).toEqual({ op, commands: 1 });
      expect(Object.keys(figures[op]!)[0]).toMatch(/^evalsha$|^eval$/);
    }
  });

  it("a recv that waits: the first on a room subscribes; the next ones, while it lingers, cost one read and one re-read", async () => {
    const { client } = target;
    const room = await client.pairedRoom();
    const waitedRecv = async () => {
      const waiting = client.recv(room.code, room.b, 20_000);
      await new Promise((r) => setTimeout(r, 200));
      const id = (await client.send(room.code, room.a, "wake")).body.id;
      expect((await waiting).body.messages).toHaveLength(1);
      await client.ack(room.code, room.b, [id]);
    };
    figures["recv (waits, first on the room's channel), with its send and ack"] = await countDuring(waitedRecv);
    figures["recv (waits, channel lingering), with its send and ack"] = await countDuring(waitedRecv);
    // read, read after subscribing, re-read after the wake; plus the send and the ack
    expect(figures["recv (waits, first on the room's channel), with its send and ack"]).toEqual({ evalsha: 5, ssubscribe: 1 });
    // read (listening already), re-read after the wake; plus the send and the ack
    expect(figures["recv (waits, channel lingering), with its send and ack"]).toEqual({ evalsha: 4 });
  });

  it("the tally is one HMGET and one ZCOUNT per hash tag, sent together", async () => {
    figures.stats = await countDuring(() => target.client.stats());
    expect(figures.stats).toEqual({ hmget: 1024, zcount: 1024 });
  });
});
