// The docker-compose topology, run from local binaries by infra/local/topology.mjs:
// Redis (AOF) <- three relays <- nginx with infra/nginx/nginx.conf. Every call below
// goes through nginx. Which replica answered comes from nginx's access log
// ($upstream_addr), matched by the X-Request-Id nginx puts on every response.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { DuetClient } from "@duet/client";
import { MAX_BODY_BYTES, MAX_TEXT_BYTES, MAX_WAIT_MS, USER_AGENT } from "@duet/protocol";
import { startBufferingNginx } from "@duet/testkit";
import { portAccepts } from "./support/topology";

const ROOT = resolve(__dirname, "../../..");
const TOPOLOGY = join(ROOT, "infra/local/topology.mjs");
const SERVER_MAIN = join(ROOT, "packages/server/dist/main.js");

interface Ready {
  url: string;
  replicas: { name: string; port: number; address: string; pid: number }[];
  nginx: { pid: number; accessLog: string; errorLog: string };
  dir: string;
  pid: number;
}

interface Call {
  name: string;
  status: number;
  body: any;
  requestId: string;
  ms: number;
}

/** Resolves with value after ms, without keeping the process alive. */
const after = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms).unref());

let harness: ChildProcess | undefined;
let harnessExit: Promise<number | null>;
let harnessStderr = "";
let topo: Ready;

function startHarness(): Promise<Ready> {
  const child = spawn(process.execPath, [TOPOLOGY, "--max-seconds", "240"], {
    cwd: ROOT,
    detached: true, // own process group: the fallback kill reaches every child
    stdio: ["ignore", "pipe", "pipe"],
    // A long fallback re-check, so a prompt wake-up can only come from Redis pub/sub.
    env: { ...process.env, SHUTDOWN_DRAIN_SECONDS: "1", WAKE_RECHECK_SECONDS: "60" },
  });
  harness = child;
  harnessExit = new Promise((r) => child.once("exit", (code) => r(code)));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (harnessStderr += d));
  return new Promise((resolveReady, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`topology not ready in 60 s:\n${harnessStderr}`)), 60_000);
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const line = out.split("\n").find((l) => l.includes('"topology ready"'));
      if (line) {
        clearTimeout(timer);
        resolveReady(JSON.parse(line) as Ready);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`topology exited (${code}) before it was ready:\n${harnessStderr}`));
    });
  });
}

async function call(
  name: string,
  method: "GET" | "POST",
  path: string,
  opts: { token?: string; body?: unknown; rawBody?: string } = {},
): Promise<Call> {
  const headers: Record<string, string> = { "user-agent": USER_AGENT };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined || opts.body !== undefined) {
    headers["content-type"] = "application/json";
    body = opts.rawBody ?? JSON.stringify(opts.body);
  }
  const started = Date.now();
  const res = await fetch(`${topo.url}${path}`, { method, headers, body, signal: AbortSignal.timeout(40_000) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return {
    name,
    status: res.status,
    body: parsed,
    requestId: res.headers.get("x-request-id") ?? "",
    ms: Date.now() - started,
  };
}

/** The replica address nginx logged for each request id (waits briefly for the log line). */
async function upstreamsOf(calls: Call[]): Promise<string[]> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const byId = new Map<string, string>();
    for (const line of readFileSync(topo.nginx.accessLog, "utf8").split("\n")) {
      if (!line.trim()) continue;
      const entry = JSON.parse(line) as { request_id: string; upstream: string };
      byId.set(entry.request_id, entry.upstream);
    }
    const found = calls.map((c) => byId.get(c.requestId));
    if (found.every((u) => u !== undefined) || Date.now() > deadline) return found.map((u) => u ?? "(not logged)");
    await new Promise((r) => setTimeout(r, 100));
  }
}

const expectOk = (c: Call) =>
  expect({ call: c.name, status: c.status, body: c.body }).toEqual({
    call: c.name,
    status: 200,
    body: expect.anything(),
  });

async function openPair() {
  const open = await call("open", "POST", "/v1/open", { body: {} });
  expectOk(open);
  const join = await call("join", "POST", "/v1/join", { body: { code: open.body.code } });
  expectOk(join);
  return { open, join, code: open.body.code as string, a: open.body.token as string, b: join.body.token as string };
}

beforeAll(async () => {
  if (!existsSync(SERVER_MAIN)) throw new Error(`${SERVER_MAIN} is missing: run \`pnpm -r build\` before this test`);
  topo = await startHarness();
}, 70_000);

afterAll(async () => {
  if (harness && harness.exitCode === null && harness.signalCode === null) {
    harness.kill("SIGTERM");
    const code = await Promise.race([harnessExit, after(20_000, "timeout")]);
    if (code === "timeout") {
      try {
        process.kill(-harness.pid!, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  }
}, 30_000);

test("the topology serves through nginx: three distinct replicas behind one URL", async () => {
  expect(topo.replicas).toHaveLength(3);
  expect(new Set(topo.replicas.map((r) => r.address)).size).toBe(3);
  const health = await call("healthz", "GET", "/healthz");
  expect(health.status).toBe(200);
  expect(health.requestId).toMatch(/^[0-9a-f]{32}$/);
});

test("open, join, send, recv, ack, close through nginx, each call on a different replica than the one before", async () => {
  const { open, join, code, a, b } = await openPair();
  expect(typeof code).toBe("string");
  expect(open.body.join_url.startsWith(`${topo.url}/join/`)).toBe(true); // PUBLIC_URL is the balancer's
  const send = await call("send", "POST", "/v1/send", {
    token: a,
    body: { code, text: "hello through nginx", idempotency_key: "k-1" },
  });
  expectOk(send);
  const recv = await call("recv", "GET", `/v1/recv?code=${encodeURIComponent(code)}&wait=0`, { token: b });
  expectOk(recv);
  expect(recv.body.messages).toEqual([{ id: send.body.id, from: "a", text: "hello through nginx" }]);
  const ack = await call("ack", "POST", "/v1/ack", { token: b, body: { code, ids: [send.body.id] } });
  expectOk(ack);
  expect(ack.body).toEqual({ ok: true, acked: 1 });
  const close = await call("close", "POST", "/v1/close", { token: a, body: { code, force: false } });
  expectOk(close);
  expect(close.body).toEqual({ ok: true });
  const after = await call("status after close", "GET", `/v1/status?code=${encodeURIComponent(code)}`, { token: b });
  expect(after.status).toBe(404);

  const calls = [open, join, send, recv, ack, close, after];
  const upstreams = await upstreamsOf(calls);
  const addresses = topo.replicas.map((r) => r.address);
  const trail = calls.map((c, i) => `${c.name}->${upstreams[i]}`).join(", ");
  for (const u of upstreams) expect(addresses).toContain(u);
  for (let i = 1; i < upstreams.length; i++) {
    if (upstreams[i] === upstreams[i - 1])
      throw new Error(`${calls[i]!.name} landed on the same replica as ${calls[i - 1]!.name}: ${trail}`);
  }
  expect(new Set(upstreams).size).toBe(3);
  // The essential property: what one replica accepted, another one delivered.
  expect(upstreams[2]).not.toBe(upstreams[3]);
});

test("a recv waiting on one replica is woken by a send through another", async () => {
  const { code, a, b } = await openPair();
  const waiting = call("recv (waiting)", "GET", `/v1/recv?code=${encodeURIComponent(code)}&wait=${MAX_WAIT_MS}`, {
    token: b,
  });
  await new Promise((r) => setTimeout(r, 500)); // let the recv reach its replica and start waiting
  const send = await call("send", "POST", "/v1/send", { token: a, body: { code, text: "wake up" } });
  expectOk(send);
  const recv = await waiting;
  expectOk(recv);
  expect(recv.body.messages).toEqual([{ id: send.body.id, from: "a", text: "wake up" }]);
  expect(recv.ms).toBeLessThan(3_000); // woken by pub/sub: not the 60 s re-check, not the 25 s timeout
  const [recvOn, sendOn] = await upstreamsOf([recv, send]);
  expect(recvOn).not.toBe(sendOn);
  expectOk(await call("close", "POST", "/v1/close", { token: a, body: { code, force: true } }));
});

test(`a ${MAX_WAIT_MS / 1000} s long-poll is not cut by nginx: 200 with no messages`, async () => {
  const { code, a, b } = await openPair();
  const recv = await call("recv (long)", "GET", `/v1/recv?code=${encodeURIComponent(code)}&wait=${MAX_WAIT_MS}`, {
    token: b,
  });
  expect(recv.status).toBe(200);
  expect(recv.body).toEqual({ messages: [] });
  expect(recv.ms).toBeGreaterThanOrEqual(MAX_WAIT_MS - 500);
  expect(recv.ms).toBeLessThan(MAX_WAIT_MS + 5000);
  expectOk(await call("close", "POST", "/v1/close", { token: a, body: { code, force: true } }));
}, 45_000);

test("the largest text, JSON-escaped to its worst case, passes nginx; a larger body is 400 too_large as JSON", async () => {
  const { code, a, b } = await openPair();
  const text = "\u0001".repeat(MAX_TEXT_BYTES); // six bytes of JSON per byte of text
  const rawBody = JSON.stringify({ code, text });
  expect(rawBody.length).toBeGreaterThan(12 * 1024 * 1024);
  expect(rawBody.length).toBeLessThanOrEqual(MAX_BODY_BYTES);
  const send = await call("send (12 MiB body)", "POST", "/v1/send", { token: a, rawBody });
  expectOk(send);
  const recv = await call("recv", "GET", `/v1/recv?code=${encodeURIComponent(code)}&wait=0`, { token: b });
  expectOk(recv);
  expect(recv.body.messages).toHaveLength(1);
  expect(recv.body.messages[0].text.length).toBe(MAX_TEXT_BYTES);

  const tooBig = await call("send (15 MiB body)", "POST", "/v1/send", {
    token: a,
    rawBody: JSON.stringify({ code, text: "x".repeat(15 * 1024 * 1024) }),
  });
  expect(tooBig.status).toBe(400);
  expect(tooBig.body).toEqual({ error: "too_large", message: expect.any(String) });
  expectOk(await call("close", "POST", "/v1/close", { token: a, body: { code, force: true } }));
});

test("the push stream passes nginx unbuffered: each event arrives while the stream stays open", async () => {
  const { code, a, b } = await openPair();
  const abort = new AbortController();
  const res = await fetch(`${topo.url}/v1/stream?code=${encodeURIComponent(code)}&format=ndjson`, {
    headers: { "user-agent": USER_AGENT, authorization: `Bearer ${b}` },
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const readUntil = async (done: () => boolean) => {
    while (!done()) {
      const chunk = await Promise.race([reader.read(), after(10_000, "timeout" as const)]);
      if (chunk === "timeout")
        throw new Error(`nothing more through nginx within 10 s; so far ${JSON.stringify(text)}`);
      if (chunk.done) throw new Error(`the stream ended; got ${JSON.stringify(text)}`);
      text += decoder.decode(chunk.value, { stream: true });
    }
  };
  try {
    // The relay's first byte (a space) comes through at once: nothing holds the stream.
    await readUntil(() => text.length > 0);
    const sends: Call[] = [];
    for (const word of ["one", "two"]) {
      const send = await call("send", "POST", "/v1/send", { token: a, body: { code, text: word } });
      expectOk(send);
      sends.push(send);
      await readUntil(() => text.includes(`"text":"${word}"`));
    }
    const lines = text
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines).toEqual(
      sends.map((send, i) => ({ event: "message", id: send.body.id, from: "a", text: ["one", "two"][i] })),
    );
  } finally {
    abort.abort();
  }
  expectOk(await call("close", "POST", "/v1/close", { token: a, body: { code, force: true } }));
});

test("MCP through nginx: the official client converses on several replicas, and a recv's progress streams before its answer", async () => {
  // Every HTTP answer's X-Request-Id, to find which replica served it.
  const served: Call[] = [];
  const recordingFetch = async (input: string | URL, init?: RequestInit) => {
    const response = await fetch(input, init);
    served.push({
      name: `mcp ${served.length}`,
      status: response.status,
      body: undefined,
      requestId: response.headers.get("x-request-id") ?? "",
      ms: 0,
    });
    return response;
  };
  const client = new Client({ name: "duet-topology-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${topo.url}/mcp`), { fetch: recordingFetch }));
  try {
    const tool = async (name: string, args: Record<string, unknown>, options?: Parameters<Client["callTool"]>[2]) => {
      const result = await client.callTool({ name, arguments: args }, undefined, options);
      if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`);
      return result.structuredContent as any;
    };
    const opened = await tool("open", {});
    expect(opened.join_url.startsWith(`${topo.url}/join/`)).toBe(true);
    const joined = await tool("join", { code: opened.code });
    let progressed!: () => void;
    const firstProgress = new Promise<void>((r) => (progressed = r));
    const waiting = tool(
      "recv",
      { code: opened.code, token: joined.token, wait: MAX_WAIT_MS },
      { onprogress: () => progressed() },
    );
    // A buffering proxy would hold the progress notification until the recv's answer, and
    // the recv would then end empty after its whole wait.
    await firstProgress;
    const sent = await tool("send", { code: opened.code, token: opened.token, text: "hello over MCP through nginx" });
    expect((await waiting).messages).toEqual([{ id: sent.id, from: "a", text: "hello over MCP through nginx" }]);
    await tool("ack", { code: opened.code, token: joined.token, ids: [sent.id] });
    await tool("close", { code: opened.code, token: opened.token });
  } finally {
    await client.close();
  }
  const upstreams = await upstreamsOf(served.filter((c) => c.requestId !== ""));
  const addresses = topo.replicas.map((r) => r.address);
  for (const u of upstreams) expect(addresses).toContain(u);
  expect(new Set(upstreams).size).toBe(3);
});

test("the path self-test through nginx (buffering off for streams) and through a buffering, cutting nginx in front of it", async () => {
  // A second nginx in front of the topology's: buffering, and cutting an answer after 10 s.
  const front = await startBufferingNginx(topo.url, 10);
  try {
    const [direct, buffered] = await Promise.all([
      new DuetClient({ baseUrl: topo.url }).selftest(),
      new DuetClient({ baseUrl: front.url }).selftest(),
    ]);
    // The repository's nginx.conf: the 25 s long-poll survives (75 s read timeout) and the
    // relay's X-Accel-Buffering: no keeps the stream's ticks a second apart.
    expect(direct.longPoll).toMatchObject({ waitMs: MAX_WAIT_MS, survived: true });
    expect(direct.stream).toMatchObject({ ticks: 5, buffered: false });
    expect(direct.advice).toEqual({ transport: "stream", waitMs: MAX_WAIT_MS });
    // Buffering on: the five ticks come as one lump at the end; the 10 s read timeout cuts
    // the long-poll, and the advised wait stays below it.
    expect(buffered.longPoll).toMatchObject({ survived: false, failure: { code: "unavailable" } });
    expect(buffered.stream).toMatchObject({ ticks: 5, buffered: true });
    expect(buffered.advice.transport).toBe("long-poll");
    expect(buffered.advice.waitMs).toBeGreaterThan(0);
    expect(buffered.advice.waitMs).toBeLessThan(10_000);
  } finally {
    await front.stop();
  }
}, 60_000);

test("SIGTERM stops every process the harness started", async () => {
  const ports = [topo.url.split(":").pop(), ...topo.replicas.map((r) => r.port)].map(Number);
  harness!.kill("SIGTERM");
  const code = await Promise.race([harnessExit, after(25_000, "timeout")]);
  expect(code).toBe(0);
  for (const port of ports) expect(await portAccepts(port)).toBe(false);
  const alive = [topo.nginx.pid, ...topo.replicas.map((r) => r.pid)].filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  });
  expect(alive).toEqual([]);
  expect(existsSync(topo.dir)).toBe(false);
}, 30_000);

test("a harness whose parent is killed stops itself and every process it started", async () => {
  // The parent holds the harness's stdout and stderr; once it is gone they have no reader.
  // The harness then once spun a core for ever (a failed log write came back through
  // uncaughtException and wrote again, starving its own shutdown) and left its relays behind.
  const parent = spawn(
    process.execPath,
    [
      "-e",
      `const c = require("node:child_process").spawn(process.execPath, [${JSON.stringify(TOPOLOGY)}, "--max-seconds", "600"], { stdio: ["ignore", "pipe", "pipe"] });
       c.stderr.on("data", () => {});
       c.stdout.on("data", (d) => process.stdout.write(d));`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  const ready = await new Promise<Ready>((done, fail) => {
    parent.stdout!.on("data", (chunk: Buffer) => {
      out += chunk;
      const line = out.split("\n").find((l) => l.includes('"topology ready"'));
      if (line) done(JSON.parse(line) as Ready);
    });
    parent.once("exit", () => fail(new Error(`the parent exited before the harness was ready: ${out}`)));
  });
  parent.kill("SIGKILL");
  const pids = [ready.pid, ready.nginx.pid, ...ready.replicas.map((r) => r.pid)];
  const alive = () =>
    pids.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
  // Gone once it has noticed (it checks every 500 ms) and drained; the deadline guards a hang.
  for (const deadline = Date.now() + 90_000; alive().length > 0 && Date.now() < deadline; )
    await new Promise((r) => setTimeout(r, 200));
  const left = alive();
  for (const pid of left) process.kill(pid, "SIGKILL");
  expect(left).toEqual([]);
  expect(existsSync(ready.dir)).toBe(false);
}, 120_000);
