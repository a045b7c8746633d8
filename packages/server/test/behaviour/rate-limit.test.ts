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
