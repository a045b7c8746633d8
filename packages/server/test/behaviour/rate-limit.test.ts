// Per-IP rate limits: all room calls, and the stricter budget for open and join. On Redis
// every node shares one count.
import { TIMED_TARGETS, forEachTarget } from "../support/targets";

// A minute's window where nothing waits it out: on a loaded machine five opens can take
// longer than a short window, which then starts again under the test (CI saw 200 for the 4th).
const LIMITS = { RATE_LIMIT_ROOMS: "3", RATE_LIMIT_REQUESTS: "20", RATE_LIMIT_WINDOW_SECONDS: "60" };
// The test that waits out its window: 10 s, room for 21 calls on a loaded machine.
const SHORT_WINDOW = { ...LIMITS, RATE_LIMIT_WINDOW_SECONDS: "10" };

forEachTarget(
  (target) => {
    it("answers 429 rate_limited with Retry-After once the room budget (open and join) is spent", async () => {
      const { client } = target();
      const replies = [];
      for (let i = 0; i < 5; i++) replies.push(await client.open());
      expect(replies.slice(0, 3).map((r) => r.status)).toEqual([200, 200, 200]);
      const limited = replies[3]!;
      expect(limited.status).toBe(429);
      expect(limited.body.error).toBe("rate_limited");
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(replies[4]!.status).toBe(429);
    });
  },
  { env: LIMITS },
);

// Waits out the 10 s window: on the timed targets (support/targets.ts).
forEachTarget(
  (target) => {
    it("counts every room call against the general budget, then lets the caller back after the window", async () => {
      const { client } = target();
      let limited;
      // Calls until one window holds 21 of them (a window can start again mid-test).
      for (let i = 0; i < 200 && !limited; i++) {
        const reply = await client.call("GET", "/v1/status", { query: { code: "zzzz-zzzz-zzzz" }, token: "t" });
        if (reply.status === 429) limited = reply;
      }
      expect(limited?.body.error).toBe("rate_limited");
      await new Promise((r) => setTimeout(r, Number(limited!.headers.get("retry-after")) * 1000 + 200));
      expect((await client.call("GET", "/v1/status", { query: { code: "zzzz-zzzz-zzzz" }, token: "t" })).status).toBe(
        404,
      );
    });
  },
  { env: SHORT_WINDOW, kinds: TIMED_TARGETS },
);

// Behind a trusted proxy the client is its X-Forwarded-For entry, reduced to the bare address
// (docs/protocol.md §10): a port, brackets or another spelling of one address never make a
// budget of their own.
forEachTarget(
  (target) => {
    const from = (address: string) => ({ headers: { "x-forwarded-for": address } });

    it("700 opens from one address on ever-changing ports are limited as one client", async () => {
      const { client } = target();
      const statuses = new Map<number, number>();
      // Ten at a time: the budget is counted per address whatever the order.
      for (let i = 0; i < 700; i += 10) {
        const batch = Array.from({ length: 10 }, (_, j) =>
          client.open(from(`203.0.113.7:${1024 + (((i + j) * 89) % 60_000)}`)),
        );
        for (const reply of await Promise.all(batch)) {
          statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
          if (reply.status !== 200) expect(reply.body.error).toBe("rate_limited");
        }
      }
      expect(Object.fromEntries(statuses)).toEqual({ 200: 5, 429: 695 });
      // The same address without a port, or with spaces, is the same client; another is not.
      expect((await client.open(from("203.0.113.7"))).status).toBe(429);
      expect((await client.open(from(" 203.0.113.7:8443 "))).status).toBe(429);
      expect((await client.open(from("203.0.113.8:1024"))).status).toBe(200);
      // 700 requests: the bound guards a hang, it measures nothing.
    }, 180_000);

    it("IPv6 with brackets and a port counts per /56, as the bare address does", async () => {
      const { client } = target();
      const spellings = [
        "[2001:db8:1:100::1]:443",
        "[2001:db8:1:1ff::2]:51234",
        "2001:DB8:1:100::3",
        "[2001:db8:1:1aa::]",
      ];
      const statuses = [];
      for (let i = 0; i < 8; i++) statuses.push((await client.open(from(spellings[i % spellings.length]!))).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
      // Another /56 has its own budget.
      expect((await client.open(from("[2001:db8:1:200::1]:443"))).status).toBe(200);
    });

    it("a forwarded client that is no address is 400 bad_request, counted under no name", async () => {
      const { client } = target();
      for (const entry of ["unknown", "garbage", "203.0.113.9:port", "[not-v6]:443", "_hidden", "203.0.113.300"]) {
        const reply = await client.open(from(entry));
        expect({ entry, status: reply.status, error: reply.body.error }).toEqual({
          entry,
          status: 400,
          error: "bad_request",
        });
        expect(reply.body.message).toContain("X-Forwarded-For");
      }
      // Only the entry the trusted proxy appended is read: what a client wrote before it is not.
      expect((await client.open(from("unknown, 198.51.100.77:1234"))).status).toBe(200);
    });
  },
  { env: { TRUST_PROXY: "1", RATE_LIMIT_ROOMS: "5", RATE_LIMIT_WINDOW_SECONDS: "600" }, kinds: TIMED_TARGETS },
);
