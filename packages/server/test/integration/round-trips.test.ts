// Redis round trips per operation, counted by Redis itself (INFO commandstats) on a Redis
// of this test's own. These are the figures in docs/redis.md §4.
import { Redis } from "ioredis";
import type { OperationId } from "@duet/protocol";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import { TABLE, sampleCall, sampleRoom } from "../support/sample-calls";
import { startTarget, type RelayTarget } from "../support/targets";

let redis: SpawnedRedis;
let admin: Redis;
let monitor: Redis;
let target: RelayTarget;

// MONITOR shows every command a client sent; commands a script ran inside Redis carry the
// source "lua" and are not round trips.
let seen: string[] = [];
/** Commands scripts ran inside Redis (not round trips: their CPU cost). */
let insideScripts: string[] = [];

/** ECHO markers the monitor has shown: everything Redis ran before one has been shown too. */
const markers = new Set<string>();
let markerCount = 0;
/** Resolves once MONITOR has shown every command Redis ran so far (an ECHO after them, seen). */
async function caughtUp(): Promise<void> {
  const marker = `round-trips-marker-${++markerCount}`;
  await admin.echo(marker);
  while (!markers.has(marker)) await new Promise((r) => setTimeout(r, 5));
}
/** Resolves once MONITOR has shown `count` commands named `name` since the count began. */
async function untilSeen(name: string, count: number): Promise<void> {
  while (seen.filter((command) => command === name).length < count) await new Promise((r) => setTimeout(r, 5));
}

/** Top-level commands the relay sent to Redis while work ran, by name. */
async function countDuring(work: () => Promise<unknown>): Promise<Record<string, number>> {
  await caughtUp();
  seen = [];
  await work();
  await caughtUp();
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
    const command = args[0]!.toLowerCase();
    if (command === "echo" && String(args[1]).startsWith("round-trips-marker-")) {
      markers.add(String(args[1]));
      return;
    }
    // The subscriber's heartbeat PING is a cost of the connection (a few a minute), not of
    // the operation measured: left out of the counts.
    if (source !== "lua" && command !== "ping") seen.push(command);
    else if (source === "lua") insideScripts.push(command);
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
    console.log(
      `Redis commands per operation:\n${Object.entries(figures)
        .map(([op, c]) => `  ${op}: ${JSON.stringify(c)}`)
        .join("\n")}`,
    );
  });

  it("every room call of the endpoint table is one script call", async () => {
    const { client } = target;
    // Each call of the table on a room prepared for it (support/sample-calls.ts: recv finds
    // a message, ack deletes it, close is refused for it), only the call itself counted.
    for (const spec of TABLE.filter((spec) => spec.room)) {
      const room = await sampleRoom(client, spec);
      const op = spec.operationId;
      figures[op] = await countDuring(() => sampleCall(client, op as OperationId, room));
      expect({ op, commands: total(figures[op]!) }).toEqual({ op, commands: 1 });
      expect(Object.keys(figures[op]!)[0]).toMatch(/^evalsha$|^eval$/);
    }
  });

  it("a recv that waits: the first on a room subscribes; the next ones, while it lingers, cost one read and one re-read", async () => {
    const { client } = target;
    const room = await client.pairedRoom();
    // The send goes once the recv waits: after its reads (two the first time: before and after
    // subscribing; one while the channel lingers) have reached Redis, not after a time.
    let reads = 2;
    const waitedRecv = async () => {
      const waiting = client.recv(room.code, room.b, 20_000);
      await untilSeen("evalsha", reads);
      reads = 1;
      const id = (await client.send(room.code, room.a, "wake")).body.id;
      expect((await waiting).body.messages).toHaveLength(1);
      await client.ack(room.code, room.b, [id]);
    };
    figures["recv (waits, first on the room's channel), with its send and ack"] = await countDuring(waitedRecv);
    figures["recv (waits, channel lingering), with its send and ack"] = await countDuring(waitedRecv);
    // read, read after subscribing, re-read after the wake; plus the send and the ack
    expect(figures["recv (waits, first on the room's channel), with its send and ack"]).toEqual({
      evalsha: 5,
      ssubscribe: 1,
    });
    // read (listening already), re-read after the wake; plus the send and the ack
    expect(figures["recv (waits, channel lingering), with its send and ack"]).toEqual({ evalsha: 4 });
  });

  it("a room's ending record: one more key per room, and a 404 costs one more script call", async () => {
    const { client } = target;
    const room = await client.pairedRoom();
    const prefix = target.config.redis!.keyPrefix;
    const keysOf = async (code: string) => (await admin.keys(`${prefix}*${code}*`)).sort();
    const live = await keysOf(room.code);
    const ending = live.find((key) => key.endsWith(":ended"))!;
    expect(ending).toBeDefined();
    const bytes = {
      room: Number(await admin.memory("USAGE", live.find((key) => key.endsWith(":room"))!)),
      ending: Number(await admin.memory("USAGE", ending)),
    };
    // Kept 'keep' ms past the room's own expiry, never longer.
    const ttl = {
      room: await admin.pttl(live.find((key) => key.endsWith(":room"))!),
      ending: await admin.pttl(ending),
    };
    expect(ttl.ending - ttl.room).toBeGreaterThan(600_000 - 5000);
    expect(ttl.ending - ttl.room).toBeLessThanOrEqual(600_000);
    insideScripts = [];
    let sentId = "";
    await countDuring(async () => (sentId = (await client.send(room.code, room.a, "counted")).body.id));
    const inside: Record<string, number> = {};
    for (const name of insideScripts) inside[name] = (inside[name] ?? 0) + 1;
    // The record costs each script that moves the expiry one HGET (its keep) and one PEXPIREAT.
    figures["send, commands inside the script"] = inside;
    expect(inside.pexpireat).toBe(6);
    expect((await client.ack(room.code, room.b, [sentId])).body.acked).toBe(1);
    figures["close (writes why into the ending record)"] = await countDuring(() => client.close(room.code, room.a));
    expect(await keysOf(room.code)).toEqual([ending]);
    const closedBytes = Number(await admin.memory("USAGE", ending));
    figures["404 to a seat of the ended room (room script, then ending-1.lua)"] = await countDuring(() =>
      client.status(room.code, room.b),
    );
    figures["404 to a stranger"] = await countDuring(() => client.status(room.code, "not-a-seat-token"));
    // (The first ending-1.lua call of a connection is an EVAL: ioredis sends the script once.)
    expect(total(figures["404 to a seat of the ended room (room script, then ending-1.lua)"]!)).toBe(2);
    expect(figures["404 to a stranger"]).toEqual({ evalsha: 2 });
    expect(figures["close (writes why into the ending record)"]).toEqual({ evalsha: 1 });
    // Not commands: the record's footprint, printed with the figures (MEMORY USAGE, bytes).
    figures["ending record, bytes (MEMORY USAGE)"] = {
      roomHash: bytes.room,
      recordWhileLive: bytes.ending,
      recordAfterClose: closedBytes,
      keysPerLiveRoom: live.length,
    };
  });

  it("a waiting status (duet wait) woken by the join", async () => {
    const { client } = target;
    const opened = (await client.open()).body;
    figures["status?wait (first on the room's channel), woken by a join"] = await countDuring(async () => {
      const waiting = client.call("GET", "/v1/status", {
        query: { code: opened.code, wait: 20_000 },
        token: opened.token,
      });
      // Waiting once its reads before and after subscribing have reached Redis.
      await untilSeen("evalsha", 2);
      await client.join(opened.code);
      expect((await waiting).body.peer_joined).toBe(true);
    });
    // read, read after subscribing, re-read after the wake; plus the join
    expect(figures["status?wait (first on the room's channel), woken by a join"]).toEqual({
      evalsha: 4,
      ssubscribe: 1,
    });
  });

  it("the tally is one HMGET and one ZCOUNT per hash tag, sent together", async () => {
    figures.stats = await countDuring(() => target.client.stats());
    expect(figures.stats).toEqual({ hmget: 1024, zcount: 1024 });
  });
});
