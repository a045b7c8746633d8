// The per-IP limits across nodes on one Redis (docs/security.md, "Rate limits"): the
// request limit is counted on each node and synced every RATE_LIMIT_SYNC_MS, so a client
// spreading its calls over the nodes is limited at about the limit (within one interval's
// calls); opens and joins are counted exactly, one round trip each.
import { startTarget, type RelayTarget } from "../support/targets";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WINDOW_SECONDS = 3600;

/** Waits until at least `needMs` remain in the current (epoch-aligned) window. */
async function roomInWindow(needMs: number): Promise<void> {
  const left = WINDOW_SECONDS * 1000 - (Date.now() % (WINDOW_SECONDS * 1000));
  if (left < needMs) await sleep(left + 100);
}

describe("rate limits shared by the nodes (three nodes, one Redis)", () => {
  let target: RelayTarget;
  const SYNC_MS = 50;
  const LIMIT = 30;
  beforeAll(async () => {
    target = await startTarget("redis-3-nodes", {
      RATE_LIMIT_REQUESTS: String(LIMIT),
      RATE_LIMIT_ROOMS: "6",
      RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
      RATE_LIMIT_SYNC_MS: String(SYNC_MS),
      // Each test is its own client address (X-Forwarded-For from the loopback "proxy").
      TRUST_PROXY: "1",
    });
  });
  const from = (address: string) => ({ "x-forwarded-for": address });
  afterAll(() => target?.close());

  it("a client spreading calls over the nodes gets the limit, not the limit per node", async () => {
    await roomInWindow(30_000);
    const statuses: number[] = [];
    // Calls a few sync intervals apart: each node has seen the others' counts before the
    // next call, so the budget is met exactly (the slack is what lands within one interval).
    for (let i = 0; i < LIMIT * 2; i++) {
      const reply = await target.client.call("GET", "/v1/status", {
        query: { code: "zzzz-zzzz-zzzz" },
        token: "t",
        node: i % 3,
        headers: from("10.0.0.1"),
      });
      statuses.push(reply.status);
      if (reply.status === 429) expect(reply.body.error).toBe("rate_limited");
      await sleep(SYNC_MS * 3);
    }
    const admitted = statuses.filter((s) => s !== 429).length;
    expect(statuses.filter((s) => s !== 429 && s !== 404)).toEqual([]);
    // Every node refuses once the shared count is spent (three nodes alone would let 90 through).
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    // The slack docs/security.md gives: a call on each of the other nodes between syncs.
    expect(admitted).toBeLessThanOrEqual(LIMIT + 2);
    expect(statuses.slice(-9).every((s) => s === 429)).toBe(true);
  }, 60_000);

  it("a burst over the nodes gets through at most the limit plus what the nodes admit in one interval", async () => {
    await roomInWindow(30_000);
    // Calls at once on every node: each node admits against the last shared count plus its
    // own, so the burst may pass the limit by what the nodes admit within one interval (at
    // most the limit on each node); after a sync every node refuses.
    const replies = await Promise.all(
      Array.from({ length: LIMIT * 4 }, (_, i) =>
        target.client.call("GET", "/v1/status", {
          query: { code: "zzzz-zzzz-zzzz" },
          token: "t",
          node: i % 3,
          headers: from("10.0.0.2"),
        }),
      ),
    );
    const admitted = replies.filter((r) => r.status === 404).length;
    expect(replies.filter((r) => r.status !== 429 && r.status !== 404)).toEqual([]);
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted).toBeLessThanOrEqual(LIMIT * 3);
    await sleep(SYNC_MS * 4);
    const after = await Promise.all(
      [0, 1, 2].map((node) =>
        target.client.call("GET", "/v1/status", {
          query: { code: "zzzz-zzzz-zzzz" },
          token: "t",
          node,
          headers: from("10.0.0.2"),
        }),
      ),
    );
    expect(after.map((r) => r.status)).toEqual([429, 429, 429]);
    console.log(`FIGURES rate-limit-burst ${JSON.stringify({ limit: LIMIT, nodes: 3, burst: LIMIT * 4, admitted })}`);
  }, 60_000);
});

describe("opens and joins: exact across nodes", () => {
  let target: RelayTarget;
  beforeAll(async () => {
    target = await startTarget("redis-3-nodes", {
      RATE_LIMIT_REQUESTS: "1000",
      RATE_LIMIT_ROOMS: "7",
      RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
      // A sync interval far above the test's length: were opens counted like the other
      // calls, every node would admit its own seven.
      RATE_LIMIT_SYNC_MS: "10000",
    });
  });
  afterAll(() => target?.close());

  it("a burst of opens and joins spread over three nodes gets exactly the budget", async () => {
    await roomInWindow(30_000);
    const opens = await Promise.all(Array.from({ length: 12 }, (_, i) => target.client.open({ node: i % 3 })));
    const opened = opens.filter((r) => r.status === 200);
    expect(opens.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    expect(opened).toHaveLength(7);
    const joins = await Promise.all(opened.map((r, i) => target.client.join(r.body.code, { node: i % 3 })));
    expect(joins.map((r) => r.status)).toEqual(joins.map(() => 429));
  }, 60_000);
});
