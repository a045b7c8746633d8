// The relay's output is JSON lines, one event each, whatever clients send: the built server
// as its own process (what `pnpm start` runs), on the in-process store and on Redis, with
// the rate limits on and clients sending X-Forwarded-For while TRUST_PROXY is unset (which
// made express-rate-limit print two multi-line ValidationError traces).
import { startTarget } from "../support/targets";

describe.each([
  ["the in-process store", { REDIS_URL: "" }],
  ["Redis", {}],
])("logs on %s", (_name, store) => {
  it("every line the process writes is one JSON object", async () => {
    const target = await startTarget("process", {
      ...store,
      RATE_LIMIT_REQUESTS: "100",
      RATE_LIMIT_ROOMS: "50",
      LOG_LEVEL: "info",
    });
    try {
      const { client } = target;
      const forwarded = { headers: { "x-forwarded-for": "203.0.113.7", forwarded: "for=203.0.113.8" } };
      const room = await client.open(forwarded);
      expect(room.status).toBe(200);
      await client.join(room.body.code, forwarded);
      await client.call("POST", "/v1/send", { rawBody: "{", token: room.body.token, ...forwarded });
      await client.call("OPTIONS", "/v1/send", forwarded);
      await client.stats(forwarded);
    } finally {
      await target.close();
    }
    const lines = target
      .logs()
      .split("\n")
      .filter((line) => line.trim() !== "");
    expect(lines.length).toBeGreaterThan(5);
    const notJson = lines.filter((line) => {
      try {
        return typeof JSON.parse(line) !== "object";
      } catch {
        return true;
      }
    });
    expect(notJson).toEqual([]);
  });
});
