// GET /v1/selftest, the path self-test: the longpoll mode holds its answer for the wait, the
// stream mode sends five ticks then `end` with the push stream's headers, bad input is a
// JSON 400, and both modes count in the public per-IP limit.
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";
import { HeldSelftests, PROBE_SLOTS, selftestProbe } from "../../src/http/selftest";

const servers: Server[] = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

async function relay(env: Record<string, string> = {}): Promise<string> {
  const app = createApp({
    config: loadConfig({ RATE_LIMIT_REQUESTS: "0", ...env }),
    store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
    logger: createLogger("silent"),
    processMetrics: false,
  });
  const server = app.listen(0, "127.0.0.1");
  servers.push(server);
  await new Promise((r) => server.once("listening", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

it("longpoll holds the answer for the wait, then answers {ok, mode, waited_ms}", async () => {
  const url = await relay();
  for (const wait of [0, 300]) {
    const reply = await fetch(`${url}/v1/selftest?mode=longpoll&wait=${wait}`);
    expect(reply.status).toBe(200);
    const body = (await reply.json()) as { ok: boolean; mode: string; waited_ms: number };
    expect(body).toEqual({ ok: true, mode: "longpoll", waited_ms: expect.any(Number) });
    // Timers never fire early by more than their rounding; load only makes the hold longer.
    expect(body.waited_ms).toBeGreaterThanOrEqual(wait - 1);
  }
  // mode defaults to longpoll
  expect(await (await fetch(`${url}/v1/selftest?wait=0`)).json()).toMatchObject({ ok: true, mode: "longpoll" });
});

it("bad input is a JSON 400 bad_request; POST is 405", async () => {
  const url = await relay();
  for (const query of ["wait=25001", "wait=abc", "mode=nope", "format=xml&mode=stream", "surprise=1"]) {
    const reply = await fetch(`${url}/v1/selftest?${query}`);
    expect({ query, status: reply.status }).toEqual({ query, status: 400 });
    expect(await reply.json()).toEqual({ error: "bad_request", message: expect.any(String) });
  }
  expect((await fetch(`${url}/v1/selftest`, { method: "POST" })).status).toBe(405);
});

async function readAll(response: Response): Promise<string[]> {
  const chunks: string[] = [];
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) chunks.push(decoder.decode(chunk));
  return chunks;
}

it("stream (SSE): the stream's headers and first byte, five ticks a second apart by the relay's clock, then end", async () => {
  const url = await relay();
  const reply = await fetch(`${url}/v1/selftest?mode=stream`);
  expect(reply.status).toBe(200);
  expect(reply.headers.get("content-type")).toMatch(/^text\/event-stream/);
  expect(reply.headers.get("x-accel-buffering")).toBe("no");
  expect(reply.headers.get("cache-control")).toBe("no-cache, no-store");
  const text = (await readAll(reply)).join("");
  expect(text.startsWith(": duet selftest\n\n")).toBe(true);
  const events = [...text.matchAll(/event: (\w+)\ndata: (.*)\n\n/g)].map((m) => ({
    event: m[1],
    ...JSON.parse(m[2]!),
  }));
  expect(events.map((e) => e.event)).toEqual(["tick", "tick", "tick", "tick", "tick", "end"]);
  expect(events.slice(0, 5).map((e) => e.n)).toEqual([1, 2, 3, 4, 5]);
  expect(events[5]).toEqual({ event: "end", ticks: 5 });
  const sent = events.slice(0, 5).map((e) => e.sent_at_ms as number);
  for (let i = 1; i < sent.length; i++) expect(sent[i]!).toBeGreaterThan(sent[i - 1]!);
}, 120_000);

it("stream (NDJSON): one line per tick, then end", async () => {
  const url = await relay();
  const reply = await fetch(`${url}/v1/selftest?mode=stream&format=ndjson`);
  expect(reply.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
  const lines = (await readAll(reply))
    .join("")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));
  expect(lines.map((l) => l.event)).toEqual(["tick", "tick", "tick", "tick", "tick", "end"]);
  expect(lines[0]).toEqual({ event: "tick", n: 1, sent_at_ms: expect.any(Number) });
}, 120_000);

it("both modes count in the public per-IP limit", async () => {
  const url = await relay({ RATE_LIMIT_REQUESTS: "2" });
  expect((await fetch(`${url}/v1/selftest?wait=0`)).status).toBe(200);
  const stream = await fetch(`${url}/v1/selftest?mode=stream`);
  expect(stream.status).toBe(200);
  await stream.body?.cancel();
  for (const query of ["wait=0", "mode=stream"]) {
    const refused = await fetch(`${url}/v1/selftest?${query}`);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: "rate_limited" });
  }
});

it("the recipe says how to use it", async () => {
  const url = await relay();
  const recipe = await (await fetch(`${url}/v1/api`)).text();
  expect(recipe).toContain("/v1/selftest?mode=longpoll&wait=25000");
  expect(recipe).toContain("/v1/selftest?mode=stream");
});

it("the MCP probe keeps at most PROBE_SLOTS notes an address, and reads its own note back", async () => {
  const notes = new Map<string, string>();
  const store = {
    putNote: async (key: string, note: string) => void notes.set(key, note),
    readNote: async (key: string) => notes.get(key),
  };
  const selftests = new HeldSelftests();
  const probe = (name: string, client: string) =>
    selftestProbe(
      { probe: `probe-${name}`, wait: 0 },
      { tokenHash: "", baseUrl: "", client },
      store,
      10_000,
      selftests,
    );
  for (let i = 0; i < 500; i++) await probe(String(i), "203.0.113.7");
  expect(notes.size).toBeLessThanOrEqual(PROBE_SLOTS);
  // A name's own note answers it at once; another address's names are its own.
  await probe("again", "203.0.113.7");
  expect(await probe("again", "203.0.113.7")).toMatchObject({ probe: "probe-again", outcome: "delivered", wait_ms: 0 });
  for (let i = 0; i < 500; i++) await probe(String(i), "198.51.100.1");
  expect(notes.size).toBeLessThanOrEqual(2 * PROBE_SLOTS);
  expect(notes.size).toBeGreaterThan(PROBE_SLOTS);
});

it("the MCP probe is held at most the MCP hold (MCP_MAX_WAIT_MS), and counts as a held self-test meanwhile", async () => {
  const notes = new Map<string, string>();
  const store = {
    putNote: async (key: string, note: string) => void notes.set(key, note),
    readNote: async (key: string) => notes.get(key),
  };
  const selftests = new HeldSelftests();
  const answer = selftestProbe(
    { probe: "probe-capped", wait: 25_000 },
    { tokenHash: "", baseUrl: "", client: "203.0.113.7" },
    store,
    200,
    selftests,
  );
  // Held once its note says running (its first write).
  while (notes.size === 0) await new Promise((r) => setImmediate(r));
  expect(selftests.size).toBe(1);
  expect(await answer).toMatchObject({ outcome: "delivered", wait_ms: 200 });
  expect(selftests.size).toBe(0);
});
