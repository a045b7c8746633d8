// /metrics as Prometheus sees it: every series an operator's queries name exists at zero from
// start-up (else Prometheus's first sample of a counter is already 1 and rate()/increase()
// never show the first event), refusals before a route keep the route's label, and
// `promtool check metrics` (Debian's prometheus package) accepts the exposition.
import { spawn } from "node:child_process";
import { ERROR_CODES, buildOpenApiDocument } from "@duet/protocol";
import { type RelayTarget, useTarget } from "../support/targets";

/** Every sample of a scrape, by its series as written ('name{label="v",...}'). */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

const scrape = async (target: RelayTarget) => {
  const reply = await target.client.metrics(0);
  expect(reply.status).toBe(200);
  return reply.text;
};

const requests = (route: string, method: string, status: number | string) =>
  `duet_http_requests_total{route="${route}",method="${method}",status="${status}"}`;

describe("a relay on Redis, before any request", () => {
  const target = useTarget("redis");

  it("has every error code, every route with each status it can answer, every Redis connection and the store-full count at zero", async () => {
    const seen = samples(await scrape(target()));
    const expected: string[] = ERROR_CODES.map((code) => `duet_errors_total{code="${code}"}`);
    // Every route the OpenAPI document describes (the endpoint table, the stream, the documents),
    // with every status it documents.
    const paths = buildOpenApiDocument().paths as Record<string, Record<string, { responses: object }>>;
    for (const [path, methods] of Object.entries(paths))
      for (const [method, operation] of Object.entries(methods))
        for (const status of Object.keys(operation.responses))
          expected.push(requests(path, method.toUpperCase(), status));
    // Routes outside the document, the 404 of an unknown path, the answer times of a success.
    expected.push(
      requests("/mcp", "POST", 200),
      requests("/join/:code", "GET", 200),
      requests("/healthz", "GET", 200),
      requests("(unmatched)", "GET", 404),
      // The other method on a path of the table: 405.
      requests("/v1/send", "GET", 405),
      requests("/v1/recv", "POST", 405),
      requests("/mcp", "GET", 405),
      'duet_http_request_duration_seconds_count{route="/v1/send",method="POST",status="200"}',
      'duet_http_request_duration_seconds_count{route="/v1/ack",method="POST",status="200"}',
    );
    for (const connection of ["commands", "subscriber"]) {
      expected.push(
        `duet_redis_connection_errors_total{connection="${connection}"}`,
        `duet_redis_reconnects_total{connection="${connection}"}`,
      );
    }
    // A full Redis (an OOM reply) apart from an unreachable one.
    expected.push("duet_store_full_total");
    // The scrape itself and the readiness checks of start-up are the only requests so far.
    const missing = expected.filter((series) => seen.get(series) !== 0);
    expect(missing).toEqual([]);
    expect(expected.length).toBeGreaterThan(80);
  });
});

describe("a relay with a general limit of 3 calls", () => {
  const target = useTarget("memory", { RATE_LIMIT_REQUESTS: "3" });

  it("labels a User-Agent 403 and a rate-limit 429 on /v1/open with /v1/open, however the path is written", async () => {
    const { client } = target();
    const before = samples(await scrape(target()));
    // The calls as the endpoint table writes them (the fast dispatch), and the same path in
    // another case and with a trailing slash (the general layers).
    for (const path of ["/v1/open", "/V1/Open", "/v1/open/"]) {
      const refused = await client.call("POST", path, { body: {}, headers: { "user-agent": "curl/8.5.0" } });
      expect({ path, status: refused.status, error: refused.body.error }).toEqual({
        path,
        status: 403,
        error: "forbidden",
      });
    }
    for (let i = 0; i < 3; i++) expect((await client.open()).status).toBe(200);
    const limited = await client.open();
    expect({ status: limited.status, error: limited.body.error }).toEqual({ status: 429, error: "rate_limited" });
    const after = samples(await scrape(target()));
    const delta = (series: string) => (after.get(series) ?? 0) - (before.get(series) ?? 0);
    expect({
      forbidden: delta(requests("/v1/open", "POST", 403)),
      limited: delta(requests("/v1/open", "POST", 429)),
      opened: delta(requests("/v1/open", "POST", 200)),
      unmatched403: delta(requests("(unmatched)", "POST", 403)),
      unmatched429: delta(requests("(unmatched)", "POST", 429)),
    }).toEqual({ forbidden: 3, limited: 1, opened: 3, unmatched403: 0, unmatched429: 0 });
    // A longer path under a room path is no route: its 404 is unmatched, not /v1/open's.
    expect((await client.call("POST", "/v1/open/extra", { body: {} })).status).toBe(429);
    const last = samples(await scrape(target()));
    expect(
      (last.get(requests("/v1/open", "POST", 429)) ?? 0) - (after.get(requests("/v1/open", "POST", 429)) ?? 0),
    ).toBe(0);
  });
});

describe("promtool check metrics", () => {
  const target = useTarget("redis");

  it("accepts a live relay's /metrics after traffic with errors", async () => {
    const { client } = target();
    const room = await client.pairedRoom();
    await client.send(room.code, room.a, "hello");
    await client.recv(room.code, room.b, 0);
    await client.call("POST", "/v1/open", { body: {}, headers: { "user-agent": "curl/8" } }); // 403
    await client.call("GET", "/v1/nothing"); // 404
    await client.send(room.code, "not-a-token", "x"); // 401
    const text = await scrape(target());
    const result = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
      const child = spawn("promtool", ["check", "metrics"], { stdio: ["pipe", "pipe", "pipe"] });
      let output = "";
      child.stdout.on("data", (d) => (output += d));
      child.stderr.on("data", (d) => (output += d));
      child.once("error", (error) =>
        reject(
          new Error(
            `promtool did not run (${error.message}): it comes with Debian's prometheus package; run node infra/scripts/test-prerequisites.mjs`,
          ),
        ),
      );
      child.once("exit", (code) => resolve({ code, output }));
      child.stdin.end(text);
    });
    expect(result).toEqual({ code: 0, output: "" });
  });
});
