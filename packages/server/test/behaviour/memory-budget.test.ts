// What one client can pin in memory is bounded: live rooms per address (ROOMS_PER_IP) on
// every store, bytes in all on the in-process store (MEMORY_STORE_MAX_BYTES), and a full
// Redis (maxmemory, noeviction) refuses writes with a JSON 503 while reads go on.
import { spawnRedis } from "@duet/testkit";
import { forEachTarget, startTarget, type RelayTarget, useTarget, pairedRoomOn } from "../support/targets";

/** Two clients behind one trusted proxy: each X-Forwarded-For is an address of its own. */
const as = (address: string) => ({ headers: { "x-forwarded-for": address } });

forEachTarget(
  (target) => {
    it("an address holds at most ROOMS_PER_IP live rooms: the next open is 429 too_many_rooms with Retry-After", async () => {
      const { client } = target();
      const alice = as("198.51.100.1");
      const opened = [];
      for (let i = 0; i < 3; i++) {
        const reply = await client.open(alice);
        expect(reply.status).toBe(200);
        opened.push(reply.body);
      }
      const refused = await client.open(alice);
      expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 429, error: "too_many_rooms" });
      // The oldest room ends at its hard cap (ROOM_MAX_SECONDS, 1800 s here) at the latest.
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(1700);
      expect(Number(refused.headers.get("retry-after"))).toBeLessThanOrEqual(1800);
      // Another address has its own budget, and joining spends none.
      expect((await client.open(as("198.51.100.2"))).status).toBe(200);
      expect((await client.join(opened[0]!.code, alice)).status).toBe(200);
      // A room closed before its hard cap gives its place back.
      expect((await client.close(opened[1]!.code, opened[1]!.token, false, alice)).status).toBe(200);
      expect((await client.open(alice)).status).toBe(200);
      expect((await client.open(alice)).status).toBe(429);
    });
  },
  { env: { ROOMS_PER_IP: "3", TRUST_PROXY: "1" } },
);

describe("the in-process store's total budget (MEMORY_STORE_MAX_BYTES)", () => {
  const target = useTarget("memory", { MEMORY_STORE_MAX_BYTES: String(1024 * 1024), LOG_LEVEL: "silent" });

  it("refuses a send past it with 507 insufficient_storage and Retry-After, and takes it again once text is acked", async () => {
    const { client, room } = await pairedRoomOn(target);
    const text = (n: number) => `${n}`.padEnd(400_000, "x");
    expect((await client.send(room.code, room.a, text(1), "k1")).status).toBe(200);
    expect((await client.send(room.code, room.a, text(2), "k2")).status).toBe(200);
    const full = await client.send(room.code, room.a, text(3), "k3");
    expect({ status: full.status, error: full.body.error }).toEqual({ status: 507, error: "insufficient_storage" });
    expect(Number(full.headers.get("retry-after"))).toBeGreaterThan(0);
    // Reads go on, and an ack frees its bytes.
    const { messages } = (await client.recv(room.code, room.b, 0)).body;
    expect(messages).toHaveLength(2);
    await client.ack(room.code, room.b, [messages[0].id]);
    expect((await client.send(room.code, room.a, text(3), "k3")).status).toBe(200);
  });

  it("refuses an open past it with 507, and takes it again once a room ends", async () => {
    const { client } = target();
    const filler = await client.pairedRoom();
    let refused: Awaited<ReturnType<typeof client.open>> | undefined;
    const rooms = [];
    for (let i = 0; i < 2000 && !refused; i++) {
      const reply = await client.open();
      if (reply.status === 200) rooms.push(reply.body);
      else refused = reply;
    }
    expect({ status: refused?.status, error: refused?.body.error }).toEqual({
      status: 507,
      error: "insufficient_storage",
    });
    for (const room of rooms.slice(0, 10)) await client.close(room.code, room.token);
    await client.close(filler.code, filler.a, true);
    expect((await client.open()).status).toBe(200);
  });
});

describe("a full Redis (maxmemory, noeviction)", () => {
  let target: RelayTarget;
  let redis: Awaited<ReturnType<typeof spawnRedis>>;
  beforeAll(async () => {
    redis = await spawnRedis(["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]);
    target = await startTarget("redis", { REDIS_URL: redis.url, LOG_LEVEL: "silent" });
  });
  afterAll(async () => {
    await target?.close();
    await redis?.stop();
  });

  it("answers writes 503 unavailable (JSON, Retry-After) while recv, ack and close go on", async () => {
    const { client } = target;
    const rooms = [];
    let full: Awaited<ReturnType<typeof client.send>> | undefined;
    for (let i = 0; i < 40 && !full; i++) {
      const room = await client.pairedRoom().catch(() => undefined);
      if (!room) break;
      rooms.push(room);
      const reply = await client.send(room.code, room.a, "x".repeat(1_000_000), "k");
      if (reply.status !== 200) full = reply;
    }
    const refusedOpen = await client.open();
    const refused = full ?? refusedOpen;
    expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 503, error: "unavailable" });
    expect(refused.headers.get("retry-after")).toBe("1");
    const room = rooms[0]!;
    const { messages } = (await client.recv(room.code, room.b, 0)).body;
    expect(messages).toHaveLength(1);
    expect((await client.ack(room.code, room.b, [messages[0].id])).body).toEqual({ ok: true, acked: 1 });
    expect((await client.close(room.code, room.a)).status).toBe(200);
  });
});
