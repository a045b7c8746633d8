// Read-your-writes under concurrency, property-based (docs/protocol.md §6.2, §6.3, §5.5).
// Four lanes, two per seat, issue sends, recvs, acks and statuses at once through every node
// of a target; fast-check chooses each lane's program, the node of each call and the order
// in which the lanes issue their calls (its scheduler), and the real calls then overlap.
// Judged afterwards in real time, from the clients' view alone:
//   - once a send is answered with an id, every recv of the peer issued afterwards returns
//     it, and every status of the sender issued afterwards lists it unread, until an ack of
//     it has been issued;
//   - once an ack is answered, no recv issued afterwards returns what it acknowledged, and no
//     status of the sender lists it unread;
//   - the room is never reported gone (404) while it lives.
// On every store (in-process, one Redis, three nodes, a Cluster, Sentinel with write-ack),
// and through a TCP proxy that adds 0, 50 and 300 ms each way between three nodes and Redis.
import fc from "fast-check";
import type { TestClient } from "../support/http-client";
import { startTarget, type RelayTarget } from "../support/targets";
import type { TargetKind } from "../support/selection";
import { ownRedis } from "../support/own-redis";

type Seat = "a" | "b";
const peerOf = (seat: Seat): Seat => (seat === "a" ? "b" : "a");

type Step = { t: "send" } | { t: "recv" } | { t: "ack"; picks: number[] } | { t: "status" };
// A lane's call: its step and the node (an index, taken modulo the target's nodes).
type Call = { step: Step; node: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ t: "send" as const }) },
  { weight: 4, arbitrary: fc.constant({ t: "recv" as const }) },
  // picks index the ids this seat has received, newest first; most name a pending message.
  { weight: 3, arbitrary: fc.record({ t: fc.constant("ack" as const), picks: fc.array(fc.nat(3), { maxLength: 2 }) }) },
  { weight: 2, arbitrary: fc.constant({ t: "status" as const }) },
);
const laneArb = fc.array(fc.record({ step: stepArb, node: fc.nat(2) }), { minLength: 1, maxLength: 6 });
// Lanes 0 and 1 are seat a, lanes 2 and 3 seat b.
const LANE_SEATS: Seat[] = ["a", "a", "b", "b"];
const programArb = fc.tuple(laneArb, laneArb, laneArb, laneArb);

interface Done {
  lane: number;
  seat: Seat;
  kind: Step["t"];
  node: number;
  startedAt: number;
  endedAt: number;
  status: number;
  error?: string;
  /** send: the id; recv: the ids returned; ack: the ids asked; status: unread. */
  ids: string[];
}

/** Runs one program in a fresh room; returns every call as it was answered. */
async function runProgram(client: TestClient, nodes: number, lanes: Call[][], s: fc.Scheduler): Promise<Done[]> {
  const room = await client.pairedRoom();
  const token = { a: room.a, b: room.b };
  const received: Record<Seat, string[]> = { a: [], b: [] };
  const done: Done[] = [];
  let sent = 0;
  const lane = async (index: number, calls: Call[]) => {
    const seat = LANE_SEATS[index]!;
    for (const { step, node: pick } of calls) {
      // fast-check releases the lanes' next calls in the order it chooses.
      await s.schedule(Promise.resolve(), `lane ${index} ${step.t}`);
      const node = pick % nodes;
      const on = { node };
      const startedAt = performance.now();
      let status = 0;
      let error: string | undefined;
      let ids: string[] = [];
      if (step.t === "send") {
        const reply = await client.send(room.code, token[seat], `m${sent++} from ${seat}`, undefined, on);
        ({ status } = reply);
        error = reply.body.error;
        if (status === 200) ids = [reply.body.id];
      } else if (step.t === "recv") {
        const reply = await client.recv(room.code, token[seat], 0, on);
        ({ status } = reply);
        error = reply.body.error;
        if (status === 200) ids = (reply.body.messages as { id: string }[]).map((m) => m.id);
        received[seat].push(...ids);
      } else if (step.t === "ack") {
        const seen = [...new Set(received[seat])].reverse();
        ids = [...new Set(step.picks.map((i) => seen[i]).filter((id): id is string => id !== undefined))];
        const reply = await client.ack(room.code, token[seat], ids, on);
        ({ status } = reply);
        error = reply.body.error;
      } else {
        const reply = await client.status(room.code, token[seat], on);
        ({ status } = reply);
        error = reply.body.error;
        if (status === 200) ids = reply.body.unread as string[];
      }
      done.push({ lane: index, seat, kind: step.t, node, startedAt, endedAt: performance.now(), status, error, ids });
    }
  };
  await s.waitFor(Promise.all(lanes.map((calls, index) => lane(index, calls))));
  await client.close(room.code, room.a, true);
  return done;
}

/** What broke the promises, one line each (empty: none). */
function readYourWritesViolations(done: Done[]): string[] {
  const violations: string[] = [];
  const ok = done.filter((d) => d.status === 200);
  const describe = (d: Done) => `${d.kind} by ${d.seat} on node ${d.node} (lane ${d.lane})`;
  // An ack of id by seat issued (started) before `by`: from then on the id may be gone.
  const ackIssuedBefore = (seat: Seat, id: string, by: number) =>
    done.some((d) => d.kind === "ack" && d.seat === seat && d.ids.includes(id) && d.startedAt < by);
  for (const d of done) {
    if (d.status === 404)
      violations.push(`${describe(d)} answered 404 ${d.error}: the room was reported gone while it lived`);
    // 503: unknown outcome (counted apart); 429 mailbox_full: eight messages are pending (§8).
    else if (d.status !== 200 && d.status !== 503 && !(d.status === 429 && d.error === "mailbox_full"))
      violations.push(`${describe(d)} answered ${d.status} ${d.error ?? ""}`.trim());
  }
  for (const send of ok.filter((d) => d.kind === "send")) {
    const [id] = send.ids;
    const reader = peerOf(send.seat);
    for (const later of ok.filter((d) => d.startedAt > send.endedAt && !ackIssuedBefore(reader, id!, d.endedAt))) {
      if (later.kind === "recv" && later.seat === reader && !later.ids.includes(id!))
        violations.push(`${describe(later)} did not return ${id}, answered to ${describe(send)} before it was issued`);
      // unread lists at most 8, oldest first (§5.5).
      if (later.kind === "status" && later.seat === send.seat && !later.ids.includes(id!) && later.ids.length < 8)
        violations.push(
          `${describe(later)} did not list ${id} unread, answered to ${describe(send)} before it was issued`,
        );
    }
  }
  for (const ack of ok.filter((d) => d.kind === "ack")) {
    for (const later of ok.filter((d) => d.startedAt > ack.endedAt)) {
      const back = ack.ids.filter((id) => later.ids.includes(id));
      if (back.length === 0) continue;
      if (later.kind === "recv" && later.seat === ack.seat)
        violations.push(
          `${describe(later)} returned ${back.join(",")}, acknowledged by ${describe(ack)} before it was issued`,
        );
      if (later.kind === "status" && later.seat === peerOf(ack.seat))
        violations.push(
          `${describe(later)} listed ${back.join(",")} unread, acknowledged by ${describe(ack)} before it was issued`,
        );
    }
  }
  return violations;
}

const LIMITS_OFF = { RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0", ROOMS_PER_IP: "0" };

async function check(target: RelayTarget, numRuns: number): Promise<void> {
  const nodes = Math.max(1, target.nodes.length);
  let calls = 0;
  let unavailable = 0;
  await fc.assert(
    fc.asyncProperty(programArb, fc.scheduler(), async (lanes, s) => {
      const done = await runProgram(target.client, nodes, lanes, s);
      calls += done.length;
      unavailable += done.filter((d) => d.status === 503).length;
      const violations = readYourWritesViolations(done);
      if (violations.length > 0) throw new Error(violations.join("\n"));
    }),
    { numRuns, endOnFailure: true },
  );
  console.log(`FIGURES read-your-writes ${JSON.stringify({ target: target.kind, numRuns, calls, unavailable })}`);
}

const KINDS: TargetKind[] = ["memory", "redis", "redis-3-nodes", "cluster-3-nodes", "sentinel"];

describe("read-your-writes, four concurrent lanes through every node", () => {
  it.each(KINDS)(
    "on %s",
    async (kind) => {
      const target = await startTarget(kind, LIMITS_OFF);
      try {
        await check(target, 20);
      } finally {
        await target.close();
      }
    },
    180_000,
  );
});

describe("read-your-writes through a slow link between three nodes and Redis", () => {
  const own = ownRedis({ kind: "redis-3-nodes", env: LIMITS_OFF, proxy: true, timeoutMs: 120_000 });

  it.each([
    [50, 10],
    [300, 5],
  ])(
    "%i ms each way",
    async (latencyMs, numRuns) => {
      own.proxy.setLatency(latencyMs);
      try {
        await check(own.target, numRuns);
      } finally {
        own.proxy.setLatency(0);
      }
    },
    240_000,
  );
});
