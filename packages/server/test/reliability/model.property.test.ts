// Property-based: random sequences of operations from both seats (send with and without
// keys, recv, ack of real and unknown ids, status, close with and without force, join
// again) run against the relay on the in-process store and on Redis, and are compared step
// by step with a small pure model of the spec (docs/protocol.md §5 to §8). Ids are
// opaque: the model maps its own message numbers to the ids the relay returned.
import fc from "fast-check";
import { MAX_PENDING_BYTES, MAX_PENDING_MESSAGES } from "@duet/protocol";
import type { TestClient } from "../support/http-client";
import { forEachTarget } from "../support/targets";

type Seat = "a" | "b";
const peerOf = (seat: Seat): Seat => (seat === "a" ? "b" : "a");
const BIG = "x".repeat(700_000); // three of these pass the 2 MiB room-wide limit
const utf8Bytes = (text: string) => Buffer.byteLength(text, "utf8");

type Op =
  | { t: "send"; seat: Seat; text: string; key?: string }
  | { t: "recv"; seat: Seat }
  | { t: "ack"; seat: Seat; picks: number[]; bogus: boolean }
  | { t: "status"; seat: Seat }
  | { t: "close"; seat: Seat; force?: boolean }
  | { t: "join" };

const seatArb = fc.constantFrom<Seat>("a", "b");
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant("send" as const),
      seat: seatArb,
      text: fc.oneof(
        { weight: 9, arbitrary: fc.constantFrom("hello", "hi", "é✓ 日本") },
        { weight: 1, arbitrary: fc.constant(BIG) },
      ),
      key: fc.option(fc.constantFrom("k1", "k2", "k3"), { nil: undefined }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("recv" as const), seat: seatArb }) },
  // picks count back from the newest id either seat has seen, so most name a real message.
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant("ack" as const),
      seat: seatArb,
      picks: fc.array(fc.nat(9), { maxLength: 3 }),
      bogus: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("status" as const), seat: seatArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("close" as const),
      seat: seatArb,
      force: fc.option(fc.boolean(), { nil: undefined }),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ t: "join" as const }) },
);

/** The spec as a state machine: one room. */
class RoomModel {
  open = true;
  joined = false;
  nextMessage = 0;
  inbox: Record<Seat, { n: number; text: string }[]> = { a: [], b: [] };
  keys = new Map<string, { n: number; text: string }>();

  pending() {
    return [...this.inbox.a, ...this.inbox.b];
  }

  apply(op: Op): {
    status: number;
    error?: string;
    n?: number;
    messages?: { n: number; from: Seat; text: string }[];
    acked?: number;
    ns?: number[];
  } {
    if (!this.open) return { status: 404, error: "not_found" };
    switch (op.t) {
      case "join":
        if (this.joined) return { status: 409, error: "full" };
        this.joined = true;
        return { status: 200 };
      case "send": {
        if (op.key !== undefined) {
          const earlier = this.keys.get(`${op.seat}:${op.key}`);
          if (earlier)
            return earlier.text === op.text
              ? { status: 200, n: earlier.n }
              : { status: 409, error: "idempotency_conflict" };
        }
        const bytes = this.pending().reduce((sum, m) => sum + utf8Bytes(m.text), 0);
        if (this.pending().length >= MAX_PENDING_MESSAGES || bytes + utf8Bytes(op.text) > MAX_PENDING_BYTES)
          return { status: 429, error: "mailbox_full" };
        const message = { n: this.nextMessage++, text: op.text };
        this.inbox[peerOf(op.seat)].push(message);
        if (op.key !== undefined) this.keys.set(`${op.seat}:${op.key}`, message);
        return { status: 200, n: message.n };
      }
      case "recv":
        return {
          status: 200,
          messages: this.inbox[op.seat].map((m) => ({ n: m.n, from: peerOf(op.seat), text: m.text })),
        };
      case "ack":
        return { status: 200 };
      case "status":
        return { status: 200 };
      case "close":
        if (this.pending().length > 0 && op.force !== true) return { status: 409, error: "unread" };
        this.open = false;
        return { status: 200 };
    }
  }

  /** Acks the model's messages ns for seat; returns how many it deleted. */
  ack(seat: Seat, ns: number[]): number {
    const before = this.inbox[seat].length;
    const wanted = new Set(ns);
    this.inbox[seat] = this.inbox[seat].filter((m) => !wanted.has(m.n));
    return before - this.inbox[seat].length;
  }
}

/** What the runs exercised, to show the property is not vacuous. */
const exercised = new Map<string, number>();
const count = (what: string) => exercised.set(what, (exercised.get(what) ?? 0) + 1);

async function runAgainstRelay(client: TestClient, ops: Op[]): Promise<void> {
  const opened = await client.open();
  if (opened.status !== 200) throw new Error(`open: ${opened.status}`);
  const code: string = opened.body.code;
  const tokens: Partial<Record<Seat, string>> = { a: opened.body.token };
  const model = new RoomModel();
  const idOf = new Map<number, string>(); // model message number -> relay id
  const numberOf = new Map<string, number>();
  const log: string[] = [];
  const fail = (message: string) => {
    throw new Error(`${message}\nsteps:\n${log.join("\n")}`);
  };

  for (const op of ops) {
    // A seat without a token (b before its join) cannot call; skip the step.
    if (op.t !== "join" && tokens[op.seat] === undefined) continue;
    log.push(JSON.stringify({ ...op, text: op.t === "send" ? op.text.slice(0, 12) : undefined }));
    if (op.t === "ack") {
      const known = [...idOf.values()];
      const ids = op.picks.filter((i) => i < known.length).map((i) => known[known.length - 1 - i]!);
      if (op.bogus) ids.push("999999999"); // well-formed, never pending
      const reply = await client.ack(code, tokens[op.seat]!, ids);
      count(`ack ${reply.status}${reply.body?.acked ? " deleted" : ""}`);
      if (!model.open) {
        if (reply.status !== 404) fail(`ack after close: ${reply.status}`);
        continue;
      }
      const expected = model.ack(
        op.seat,
        ids.filter((id) => numberOf.has(id)).map((id) => numberOf.get(id)!),
      );
      if (reply.status !== 200 || reply.body.acked !== expected || reply.body.ok !== true)
        fail(`ack: expected acked ${expected}, got ${reply.status} ${reply.text}`);
      continue;
    }
    const expected = model.apply(op);
    let reply;
    switch (op.t) {
      case "join":
        reply = await client.join(code);
        if (reply.status === 200) tokens.b = reply.body.token;
        break;
      case "send":
        reply = await client.send(code, tokens[op.seat]!, op.text, op.key);
        break;
      case "recv":
        reply = await client.recv(code, tokens[op.seat]!, 0);
        break;
      case "status":
        reply = await client.status(code, tokens[op.seat]!);
        break;
      case "close":
        reply = await client.close(code, tokens[op.seat]!, op.force);
        break;
    }
    count(`${op.t} ${reply.status}${reply.body?.error ? ` ${reply.body.error}` : ""}`);
    if (reply.status !== expected.status)
      fail(`${op.t}: expected ${expected.status}, got ${reply.status} ${reply.text.slice(0, 200)}`);
    if (expected.error !== undefined && reply.body.error !== expected.error)
      fail(`${op.t}: expected error ${expected.error}, got ${reply.text.slice(0, 200)}`);
    if (reply.status !== 200) continue;
    if (op.t === "send") {
      const id: string = reply.body.id;
      const known = idOf.get(expected.n!);
      if (known === undefined) {
        if (numberOf.has(id)) fail(`send: new message got an id already used: ${id}`);
        idOf.set(expected.n!, id);
        numberOf.set(id, expected.n!);
      } else if (known !== id) fail(`send: retry with key ${op.key} got ${id}, first got ${known}`);
    }
    if (op.t === "recv") {
      const got = (reply.body.messages as { id: string; from: string; text: string }[]).map((m) => ({
        n: numberOf.get(m.id),
        from: m.from,
        text: m.text,
      }));
      const want = expected.messages!.map((m) => ({ n: m.n, from: m.from, text: m.text }));
      if (JSON.stringify(got) !== JSON.stringify(want))
        fail(
          `recv for ${op.seat}: expected ${JSON.stringify(want).slice(0, 300)}, got ${JSON.stringify(got).slice(0, 300)}`,
        );
    }
    if (op.t === "status") {
      const body = reply.body;
      const want = {
        members: model.joined ? ["a", "b"] : ["a"],
        peer_joined: model.joined,
        pending_in: model.inbox[op.seat].length,
        pending_out: model.inbox[peerOf(op.seat)].length,
      };
      const got = {
        members: body.members,
        peer_joined: body.peer_joined,
        pending_in: body.pending_in,
        pending_out: body.pending_out,
      };
      if (JSON.stringify(got) !== JSON.stringify(want))
        fail(`status for ${op.seat}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
      if (typeof body.peer_active !== "boolean" || !Number.isInteger(body.expires_in))
        fail(`status shape: ${reply.text}`);
    }
  }
  // Clean up what the property left open.
  if (model.open) await client.close(code, tokens.a!, true);
}

const NUM_RUNS = Number(process.env.DUET_PROPERTY_RUNS ?? (process.env.DUET_SOAK === "1" ? 1000 : 50));

forEachTarget(
  (target) => {
    it(`${NUM_RUNS} random sequences of up to 30 operations agree with the model of the spec`, async () => {
      await fc.assert(
        // Most runs start with the join, so that both seats act; some never join.
        fc.asyncProperty(fc.nat(4), fc.array(opArb, { minLength: 10, maxLength: 29 }), (dice, ops) =>
          runAgainstRelay(target().client, dice === 0 ? ops : [{ t: "join" }, ...ops]),
        ),
        { numRuns: NUM_RUNS, endOnFailure: false },
      );
      console.log(`FIGURES property ${target().kind} ${JSON.stringify(Object.fromEntries([...exercised].sort()))}`);
      exercised.clear();
    }, 300_000);
  },
  { kinds: ["memory", "redis"] },
);
