// The store layer on its own: RoomStore called directly, with no HTTP in between, on the
// in-process store, one real Redis and a real Redis Cluster (the Lua scripts run for real,
// never mocked). Each rule of the room (docs/protocol.md §5 to §8, §16) is asserted once
// here for every store, in milliseconds; the behaviour suite checks the same through HTTP.
import { MAX_PENDING_BYTES, MAX_PENDING_MESSAGES, type Seat } from "@duet/protocol";
import { loadConfig, type Config } from "../../src/config";
import type { ApiError } from "../../src/errors";
import { createStore } from "../../src/relay";
import { hashSeatToken } from "../../src/store/credentials";
import type { RoomStore, SeatCredentials, WakeEvent } from "../../src/store/room-store";
import { uniquePrefix } from "../support/targets";

type StoreKind = "memory" | "redis" | "cluster";
const KINDS: StoreKind[] = ["memory", "redis", "cluster"];

function configFor(kind: StoreKind, lifetimes: Partial<Config> = {}): Config {
  const env: Record<string, string> = { LOG_LEVEL: "silent" };
  if (kind !== "memory") env.REDIS_KEY_PREFIX = uniquePrefix();
  if (kind === "redis") env.REDIS_URL = process.env.REDIS_URL!;
  if (kind === "cluster") env.REDIS_CLUSTER_NODES = process.env.REDIS_CLUSTER_NODES!;
  return { ...loadConfig(env), ...lifetimes };
}

/** The refusal a store call throws: its catalogue code and, for an ended room, how it ended. */
async function refusal(call: Promise<unknown>): Promise<{ code: string; ended?: unknown }> {
  try {
    await call;
  } catch (error) {
    const { code, ended } = error as ApiError;
    return ended === undefined ? { code } : { code, ended };
  }
  throw new Error("the call succeeded");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await check()); await sleep(20))
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
}

interface Room {
  code: string;
  a: SeatCredentials;
  b: SeatCredentials;
}

/** A store of the kind, once it answers (a Redis store connects in the background). */
async function storeOf(kind: StoreKind, lifetimes: Partial<Config> = {}): Promise<RoomStore> {
  const { store } = createStore(configFor(kind, lifetimes));
  await until(() => store.isReady(), "the store answers");
  return store;
}

// Guards, not measures: a wake-up test may wait up to 60 s for a shard subscriber (watch, below).
jest.setTimeout(90_000);

describe.each(KINDS)("RoomStore on %s", (kind) => {
  let store: RoomStore;
  const extra: RoomStore[] = [];
  beforeAll(async () => {
    store = await storeOf(kind);
  });
  afterAll(async () => {
    await Promise.all([store, ...extra].map((s) => s.close()));
  });

  const seatOf = (code: string, token: string): SeatCredentials => ({ code, tokenHash: hashSeatToken(token) });
  async function pairedRoom(on = store, e2e = false): Promise<Room> {
    const opened = await on.openRoom({ e2e });
    const joined = await on.joinRoom(opened.code);
    return { code: opened.code, a: seatOf(opened.code, opened.token), b: seatOf(opened.code, joined.token) };
  }
  /**
   * Listens to the room's wake-ups. A cluster's sharded subscriber connects to a shard on its
   * first subscription there, which a loaded machine can take longer than the bus waits for
   * (the relay then re-reads every second instead): the listening is retried until it holds.
   * Only the room's own events are kept. The 60 s is a guard against a subscriber that never
   * connects, not a measure: a shard's first subscription may take seconds on a busy machine.
   */
  async function watch(code: string, events: WakeEvent[]): Promise<() => void> {
    for (const deadline = Date.now() + 60_000; ; await sleep(50)) {
      try {
        // "resync" (re-read everything) comes whenever a cluster's shard subscriber (re)connects.
        return await store.wakeups.watch(code, (event) => event !== "resync" && events.push(event));
      } catch (error) {
        if (Date.now() > deadline) throw error;
      }
    }
  }
  const send = (seat: SeatCredentials, text: string, idempotencyKey?: string, textDigest = text) =>
    store.sendMessage({
      ...seat,
      text,
      envelope: false,
      ...(idempotencyKey === undefined ? {} : { idempotencyKey, textDigest }),
    });

  it("a note (the MCP self-test's probes) reads back until it expires, the last one written wins", async () => {
    expect(await store.readNote("probe-none")).toBeUndefined();
    await store.putNote("probe-1", '{"outcome":"running"}', 60_000);
    await store.putNote("probe-1", '{"outcome":"cut"}', 60_000);
    expect(await store.readNote("probe-1")).toBe('{"outcome":"cut"}');
    await store.putNote("probe-2", "short", 30);
    await until(async () => (await store.readNote("probe-2")) === undefined, "the short note expires");
  });

  it("open takes seat a, join seat b, a third join is full and a join of no room is not_found", async () => {
    const opened = await store.openRoom();
    expect(opened).toMatchObject({ seat: "a", e2e: false, code: expect.stringMatching(/^\w{4}-\w{4}-\w{4}$/) });
    expect(opened.expiresInMs).toBeGreaterThan(0);
    const a = seatOf(opened.code, opened.token);
    expect(await store.getStatus(a)).toMatchObject({ seat: "a", members: ["a"], peerJoined: false });
    const joined = await store.joinRoom(opened.code);
    expect(joined).toMatchObject({ seat: "b", code: opened.code, e2e: false });
    expect(await store.getStatus(a)).toMatchObject({ members: ["a", "b"], peerJoined: true, peerActive: true });
    expect(await refusal(store.joinRoom(opened.code))).toEqual({ code: "full" });
    expect(await refusal(store.joinRoom("zzzz-zzzz-zzzz"))).toEqual({ code: "not_found" });
    expect(await store.describeRoom(opened.code)).toEqual({ e2e: false });
    expect(await store.describeRoom("zzzz-zzzz-zzzz")).toBeUndefined();
  });

  it("a token that holds no seat is unauthorized on a live room", async () => {
    const room = await pairedRoom();
    const stranger = seatOf(room.code, "not-a-seat-token");
    expect(await refusal(store.getStatus(stranger))).toEqual({ code: "unauthorized" });
    expect(await refusal(send(stranger, "hi"))).toEqual({ code: "unauthorized" });
  });

  it("ids are digits that grow; the inbox is oldest first, from the peer, and reading does not consume", async () => {
    const room = await pairedRoom();
    const ids: string[] = [];
    for (const text of ["one", "two", "three"]) ids.push((await send(room.a, text)).id);
    for (const id of ids) expect(id).toMatch(/^[0-9]{1,15}$/);
    expect(ids.map(Number)).toEqual([...ids.map(Number)].sort((x, y) => x - y));
    expect(new Set(ids).size).toBe(3);
    const inbox = await store.readInbox(room.b, true);
    expect(inbox.seat).toBe("b");
    expect(inbox.messages).toEqual([
      { id: ids[0], from: "a", text: "one" },
      { id: ids[1], from: "a", text: "two" },
      { id: ids[2], from: "a", text: "three" },
    ]);
    expect((await store.readInbox(room.b, false)).messages).toHaveLength(3);
    expect((await store.readInbox(room.a, true)).messages).toEqual([]);
    const later = (await send(room.b, "back")).id;
    expect(Number(later)).toBeGreaterThan(Number(ids[2]));
  });

  it("a text comes back as sent: a leading U+FEFF, NULs, 4-byte and non-characters", async () => {
    const room = await pairedRoom();
    const texts = ["\ufeffbom first", "\ufeff", "\u0000nul\u0000", "😀\u{10ffff}\ufffe"];
    const ids: string[] = [];
    for (const text of texts) ids.push((await send(room.a, text)).id);
    expect((await store.readInbox(room.b, true)).messages).toEqual(
      texts.map((text, i) => ({ id: ids[i], from: "a", text })),
    );
  });

  it("idempotency: the same key and text give the first id back (even after its ack); another text conflicts; keys are per seat", async () => {
    const room = await pairedRoom();
    const first = await send(room.a, "hello", "k1");
    expect(first.replayed).toBe(false);
    expect(await send(room.a, "hello", "k1")).toEqual({ id: first.id, replayed: true });
    expect(await refusal(send(room.a, "other", "k1"))).toEqual({ code: "idempotency_conflict" });
    const fromB = await send(room.b, "hello", "k1");
    expect(fromB.replayed).toBe(false);
    expect(fromB.id).not.toBe(first.id);
    await store.ackMessages(room.b, [first.id]);
    expect(await send(room.a, "hello", "k1")).toEqual({ id: first.id, replayed: true });
    expect((await store.readInbox(room.b, false)).messages).toEqual([]);
  });

  it("the mailbox holds 8 messages room-wide; the key is checked before it; a refused send stores nothing", async () => {
    const room = await pairedRoom();
    const ids: string[] = [];
    for (let i = 0; i < MAX_PENDING_MESSAGES; i++)
      ids.push((await send(i % 2 === 0 ? room.a : room.b, `m${i}`, `k${i}`)).id);
    expect(await refusal(send(room.a, "one too many", "late"))).toEqual({ code: "mailbox_full" });
    // The retry of an accepted send still gets its id back.
    expect(await send(room.a, "m0", "k0")).toEqual({ id: ids[0], replayed: true });
    await store.ackMessages(room.b, [ids[0]!]);
    // The refused send left no idempotency record: its retry is a new message.
    expect((await send(room.a, "one too many", "late")).replayed).toBe(false);
  });

  it("the mailbox holds 2 MiB of text room-wide", async () => {
    const room = await pairedRoom();
    const half = "x".repeat(MAX_PENDING_BYTES / 2);
    const first = await send(room.a, half);
    await send(room.b, half);
    expect(await refusal(send(room.a, "y"))).toEqual({ code: "mailbox_full" });
    await store.ackMessages(room.b, [first.id]);
    expect((await send(room.a, "y")).replayed).toBe(false);
  });

  it("ack deletes only the caller's own inbox, ignores unknown ids, and counts what it deleted", async () => {
    const room = await pairedRoom();
    const toB = await send(room.a, "for b");
    const toA = await send(room.b, "for a");
    expect(await store.ackMessages(room.b, [toA.id, "999999999", toB.id, toB.id])).toEqual({ acked: 1 });
    expect(await store.ackMessages(room.b, [toB.id])).toEqual({ acked: 0 });
    expect(await store.ackMessages(room.b, [])).toEqual({ acked: 0 });
    expect((await store.readInbox(room.a, false)).messages.map((m) => m.id)).toEqual([toA.id]);
    expect(await store.getStatus(room.a)).toMatchObject({ pendingIn: 1, unread: [] });
    expect(await store.getStatus(room.b)).toMatchObject({ pendingIn: 0, unread: [toA.id] });
  });

  it("read receipts: status lists the caller's unread ids oldest first; an ack that deletes wakes the sender with the ids it deleted, oldest first", async () => {
    const room = await pairedRoom();
    const ids: string[] = [];
    for (const text of ["r1", "r2", "r3"]) ids.push((await send(room.a, text)).id);
    const toA = await send(room.b, "for a");
    expect((await store.getStatus(room.a)).unread).toEqual(ids);
    expect((await store.getStatus(room.b)).unread).toEqual([toA.id]);
    const events: WakeEvent[] = [];
    const stop = await watch(room.code, events);
    try {
      // Listed newest first, with a foreign id and an unknown one: only b's own deleted ids, sorted.
      expect(await store.ackMessages(room.b, [ids[2]!, toA.id, "12345", ids[0]!])).toEqual({ acked: 2 });
      // Deletes nothing: no receipt.
      expect(await store.ackMessages(room.b, [ids[0]!, toA.id])).toEqual({ acked: 0 });
      expect(await store.ackMessages(room.a, [toA.id])).toEqual({ acked: 1 });
      // Events on one channel arrive in order: a receipt from the ack that deleted nothing would come second.
      await until(async () => events.length >= 2, "two receipts arrived");
      expect(events).toEqual([`read:a:${ids[0]},${ids[2]}`, `read:b:${toA.id}`]);
    } finally {
      stop();
    }
    expect((await store.getStatus(room.a)).unread).toEqual([ids[1]]);
    expect((await store.getStatus(room.b)).unread).toEqual([]);
  });

  it("an encrypted room refuses a text that is not an envelope and says so in status", async () => {
    const room = await pairedRoom(store, true);
    expect(await refusal(send(room.a, "plain"))).toEqual({ code: "e2e_required" });
    expect((await store.sendMessage({ ...room.a, text: "duet-e2e:v1:x:y:z", envelope: true })).replayed).toBe(false);
    expect(await store.getStatus(room.b)).toMatchObject({ e2e: true });
    expect(await store.describeRoom(room.code)).toEqual({ e2e: true });
  });

  it("close is refused while anything is unread; closed: both seats learn who closed it, a stranger learns nothing", async () => {
    const room = await pairedRoom();
    const sent = await send(room.a, "read me");
    expect(await refusal(store.closeRoom(room.b, false))).toEqual({ code: "unread" });
    expect((await store.getStatus(room.b)).pendingIn).toBe(1);
    await store.ackMessages(room.b, [sent.id]);
    await store.closeRoom(room.b, false);
    const closed = { reason: "closed", by: "b", at: expect.any(String) };
    expect(await refusal(store.getStatus(room.a))).toEqual({ code: "not_found", ended: closed });
    expect(await refusal(store.readInbox(room.b, true))).toEqual({ code: "not_found", ended: closed });
    expect(await refusal(store.closeRoom(room.a, true))).toEqual({ code: "not_found", ended: closed });
    expect(await refusal(store.getStatus(seatOf(room.code, "stranger")))).toEqual({ code: "not_found" });
    expect(await refusal(store.joinRoom(room.code))).toEqual({ code: "not_found" });
  });

  it("force_closed: each seat reads what was abandoned from its own side", async () => {
    const room = await pairedRoom();
    await send(room.a, "a1");
    await send(room.a, "a2");
    await send(room.b, "b1");
    await store.closeRoom(room.a, true);
    const seen = async (seat: SeatCredentials) => (await refusal(store.getStatus(seat))).ended;
    expect(await seen(room.a)).toEqual({
      reason: "force_closed",
      by: "a",
      abandoned: { in: 1, out: 2 },
      at: expect.any(String),
    });
    expect(await seen(room.b)).toEqual({
      reason: "force_closed",
      by: "a",
      abandoned: { in: 2, out: 1 },
      at: expect.any(String),
    });
  });

  it("a forced close with nothing unread is a plain close", async () => {
    const room = await pairedRoom();
    await store.closeRoom(room.a, true);
    expect((await refusal(store.getStatus(room.b))).ended).toEqual({
      reason: "closed",
      by: "a",
      at: expect.any(String),
    });
  });

  it("wake-ups: join, a send to each seat and the close reach a watcher of the room", async () => {
    const opened = await store.openRoom();
    const events: WakeEvent[] = [];
    const stop = await watch(opened.code, events);
    try {
      const a = seatOf(opened.code, opened.token);
      const b = seatOf(opened.code, (await store.joinRoom(opened.code)).token);
      const toB = await send(a, "to b");
      await send(b, "to a");
      await store.ackMessages(b, [toB.id]);
      await store.closeRoom(a, true);
      await until(async () => events.length >= 5, "five wake-ups arrived");
      expect(events).toEqual(["joined", "b", "a", `read:a:${toB.id}`, "closed"]);
    } finally {
      stop();
    }
  });

  // Rooms that live 5 s. The status before the end may come after it on a slow machine: then
  // it must already tell the same ending (either answer is correct; a wrong one fails).
  const LIFETIME_MS = 5000;
  describe.each<[string, Partial<Config>, string]>([
    ["idle", { roomIdleMs: LIFETIME_MS, roomMaxMs: 60_000 }, "idle_timeout"],
    ["hard cap", { roomIdleMs: 60_000, roomMaxMs: LIFETIME_MS }, "hard_cap"],
  ])("a room that expires (%s)", (_name, lifetimes, reason) => {
    it(`ends with ${reason}, told to both seats`, async () => {
      const short = await storeOf(kind, lifetimes);
      extra.push(short);
      const room = await pairedRoom(short);
      const before = await short.getStatus(room.a).then(
        (status) => ({ expiresInMs: status.expiresInMs }),
        (error: unknown) => refusal(Promise.reject(error)),
      );
      if ("expiresInMs" in before) expect(before.expiresInMs).toBeLessThanOrEqual(LIFETIME_MS);
      else expect(before).toEqual({ code: "not_found", ended: { reason, at: expect.any(String) } });
      // Re-reads that do not count as activity, until the room is gone.
      await until(
        () =>
          short.readInbox(room.a, false).then(
            () => false,
            () => true,
          ),
        "the room expired",
      );
      for (const seat of [room.a, room.b] as const) {
        expect(await refusal(short.getStatus(seat))).toEqual({
          code: "not_found",
          ended: { reason, at: expect.any(String) },
        });
      }
    });
  });

  it("status as each seat sees it", async () => {
    const opened = await store.openRoom();
    const a = seatOf(opened.code, opened.token);
    const first = await send(a, "before the peer joined");
    const b = seatOf(opened.code, (await store.joinRoom(opened.code)).token);
    const expected = (seat: Seat, pendingIn: number, unread: string[]) => ({
      seat,
      members: ["a", "b"],
      expiresInMs: expect.any(Number),
      peerJoined: true,
      peerActive: true,
      pendingIn,
      unread,
      e2e: false,
    });
    expect(await store.getStatus(a)).toEqual(expected("a", 0, [first.id]));
    expect(await store.getStatus(b, false)).toEqual(expected("b", 1, []));
  });
});
