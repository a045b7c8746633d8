// The history checker (test/support/history.ts) on small hand-made histories: what it counts
// when Redis loses the tail of its writes, when a kill explains an undone write, and what
// nothing explains.
import { checkHistory, History, isHung, messageText, type Operation } from "../support/history";

const ROOM = "R";
const text = (seq: number) => messageText(ROOM, "a", seq);

function build(steps: (Partial<Operation> & Pick<Operation, "kind" | "startedAt" | "endedAt">)[]): History {
  const history = new History();
  for (const step of steps) history.record({ room: ROOM, seat: "a", outcome: "ok", status: 200, ...step } as Operation);
  return history;
}
const send = (seq: number, id: string, startedAt: number) => ({
  kind: "send" as const,
  text: text(seq),
  idempotencyKey: `k-a-${seq}`,
  id,
  startedAt,
  endedAt: startedAt + 5,
});
const recv = (startedAt: number, ...messages: [string, number][]) => ({
  kind: "recv" as const,
  seat: "b" as const,
  startedAt,
  endedAt: startedAt + 5,
  messages: messages.map(([id, seq]) => ({ id, from: "a", text: text(seq) })),
});
const ack = (startedAt: number, ...ids: string[]) => ({
  kind: "ack" as const,
  seat: "b" as const,
  ids,
  startedAt,
  endedAt: startedAt + 5,
});
// Redis killed at 1000, answering again at 1300.
const kills = [{ issuedAt: 1000, restartedAt: 1300 }];

describe("an acknowledged send lost with the tail of Redis's writes", () => {
  // Send 0 acknowledged as id 1 at 900, lost by the kill at 1000; send 1 gets id 2.
  const history = build([send(0, "1", 900), send(1, "2", 1400), recv(1500, ["2", 1]), ack(1600, "2")]);

  it("counts both sends as acknowledged and the first as lost", () => {
    const result = checkHistory(history);
    expect(result.acknowledgedSends).toBe(2);
    expect(result.lost).toBe(1);
    expect(result.violations).toEqual([
      `acknowledged send R|1 (${text(0)}) missing from a recv started 595 ms after it was answered`,
    ]);
  });

  it("is explained when a Redis kill came after it", () => {
    const result = checkHistory(history, { kills });
    expect(result.violations).toEqual([]);
    expect(result.lost).toBe(1);
    expect(result.undoneByKill).toBe(1);
  });

  it("is not explained by a kill that came before it", () => {
    const result = checkHistory(history, { kills: [{ issuedAt: 500, restartedAt: 800 }] });
    expect(result.violations).toEqual([
      `acknowledged send R|1 (${text(0)}) missing from a recv started 595 ms after it was answered (no Redis kill came between it and the sign that it was undone)`,
    ]);
  });
});

it("a loss that is not a tail of Redis's writes is a violation: a later write survived the kill", () => {
  // Send 0 (id 1) lost, but send 1 (id 2), acknowledged after it and before the kill, is
  // delivered after the restart: the kill lost no tail reaching back to send 0.
  const history = build([send(0, "1", 900), send(1, "2", 950), recv(1400, ["2", 1]), ack(1500, "2")]);
  const result = checkHistory(history, { kills });
  expect(result.lost).toBe(1);
  expect(result.undoneByKill).toBe(0);
  expect(result.violations).toHaveLength(1);
  expect(result.violations[0]).toContain("not a lost AOF tail");
});

describe("loss against unavailability (read-your-writes)", () => {
  it("a send no recv of its reader could have returned is unverified, not lost", () => {
    // The reader's only successful recv started before the send was answered.
    const result = checkHistory(build([recv(100), send(0, "1", 200)]));
    expect(result.lost).toBe(0);
    expect(result.unverified).toBe(1);
    expect(result.violations).toEqual([
      `acknowledged send R|1 (${text(0)}) unverified: no recv of its reader succeeded after it was answered (unavailability, not loss)`,
    ]);
  });

  it("a recv that started after the send was answered and lacks it is a loss", () => {
    const result = checkHistory(build([send(0, "1", 200), recv(206)]));
    expect(result.lost).toBe(1);
    expect(result.unverified).toBe(0);
  });

  it("a recv that overlapped the send may lack it", () => {
    const result = checkHistory(build([send(0, "1", 200), recv(203), recv(300, ["1", 0]), ack(400, "1")]));
    expect(result).toMatchObject({ lost: 0, unverified: 0, violations: [] });
  });
});

describe("a message delivered again after its ack", () => {
  const history = build([send(0, "1", 100), recv(200, ["1", 0]), ack(900, "1"), recv(1400, ["1", 0]), ack(1500, "1")]);

  it("is a violation without kills", () => {
    const result = checkHistory(history);
    expect(result.redeliveredAfterAck).toBe(1);
    expect(result.violations).toHaveLength(1);
  });

  it("is explained by a kill after the ack (the ack was in the lost tail)", () => {
    const result = checkHistory(history, { kills });
    expect(result.redeliveredAfterAck).toBe(0);
    expect(result.undoneByKill).toBe(1);
    expect(result.violations).toEqual([]);
  });
});

it("an id given to two messages is a violation, whatever the kills", () => {
  // Ids never go back (docs/protocol.md §2): not even a kill may explain a reused one, seen
  // in two deliveries or in two acknowledged sends.
  const delivered = build([
    send(0, "1", 900),
    recv(920, ["1", 0]),
    send(1, "1", 1400),
    recv(1500, ["1", 1]),
    ack(1600, "1"),
  ]);
  const acknowledged = build([
    send(0, "1", 900),
    recv(920, ["1", 0]),
    ack(990, "1"),
    send(1, "1", 1400),
    ack(1500, "1"),
  ]);
  for (const history of [delivered, acknowledged]) {
    for (const options of [{}, { kills }]) {
      const result = checkHistory(history, options);
      expect(result.idsReused).toBe(1);
      expect(result.violations).toContain("id R|1 given to 2 different messages");
    }
  }
});

it("a message first delivered after a larger id is a violation: a client resuming after that id would skip it", () => {
  // Send 1 (id 5) was delivered before send 0 (id 3), which was kept: a lost write from a
  // Redis whose clock ran ahead, for example.
  const history = build([send(1, "5", 100), recv(200, ["5", 1]), send(0, "3", 300), recv(400, ["5", 1], ["3", 0])]);
  for (const options of [{}, { kills }]) {
    const result = checkHistory(history, options);
    expect(result.skippedOnResume).toBe(1);
    expect(result.violations).toContain(
      "message 3 in R first delivered after id 5: a client resuming after that id would skip it",
    );
  }
  // In order, and delivered again (recv does not consume): nothing.
  expect(
    checkHistory(build([send(0, "3", 100), recv(200, ["3", 0]), send(1, "5", 300), recv(400, ["3", 0], ["5", 1])]))
      .skippedOnResume,
  ).toBe(0);
});

it("a send stored twice is explained only when a kill undid the first copy before the second", () => {
  // Send 0's first attempt (no answer) stored it as id 1, delivered at 920; the kill lost it
  // with its idempotency record, and the retry after the restart stored it as id 2.
  const unknown = { ...send(0, "", 900), id: undefined, outcome: "unknown" as const, status: 0, endedAt: 980 };
  const steps = [unknown, recv(920, ["1", 0]), { ...send(0, "2", 1400) }, recv(1500, ["2", 0]), ack(1600, "2")];
  expect(checkHistory(build(steps)).duplicates).toBe(1);
  const result = checkHistory(build(steps), { kills });
  expect(result.duplicates).toBe(0);
  expect(result.violations).toEqual([]);
  expect(checkHistory(build(steps), { kills: [{ issuedAt: 2000, restartedAt: 2300 }] }).duplicates).toBe(1);
});

describe("a hung request and a starved machine", () => {
  const busy = (ms: number) => {
    for (const end = performance.now() + ms; performance.now() < end; );
  };
  const tick = () => new Promise((resolve) => setTimeout(resolve, 60));

  it("does not count the time the event loop was held as the request's own", async () => {
    const history = new History();
    await tick();
    const startedAt = history.now();
    busy(600); // the loop is held: no timer, no socket read, no relay timeout can run
    await tick();
    const endedAt = history.now();
    expect(history.stalls.within(startedAt, endedAt)).toBeGreaterThan(500);
    // 600 ms of it stall, against a 400 ms margin: hung if the stall counted, not hung without
    // it (the margin is the two timers' own lateness, which a busy machine adds to).
    expect(isHung(history, { startedAt, endedAt }, 400)).toBe(false);
  });

  it("still counts a request that waited with the loop free", async () => {
    const history = new History();
    await tick();
    const startedAt = history.now();
    // Waiting, the loop free: 1.5 s over a 100 ms margin. A busy machine stalls the loop a
    // little even then, never most of it.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const endedAt = history.now();
    expect(history.stalls.within(startedAt, endedAt)).toBeLessThan(1400);
    expect(isHung(history, { startedAt, endedAt }, 100)).toBe(true);
  });
});
