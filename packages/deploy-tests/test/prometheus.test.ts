// The dashboard against the real thing: Debian's Prometheus scrapes the three relays of the
// local topology (infra/local/topology.mjs: Redis, three relays, nginx) every second while a
// scripted workload runs through nginx: one of each error the relay can be made to answer
// (each the first of its kind on its node), a held recv and an open stream, a Redis pause
// (503) and a Redis connection kill (reconnects). Then every expression of
// infra/grafana/duet-dashboard.json is evaluated through Prometheus's API, as Grafana would,
// and each must return data matching what the workload did.
//
// Counters are compared as Prometheus computes them. Every counter starts at 0, so rate() and
// increase() do not extrapolate towards the start of the range; towards its end they do, by
// the time since the relay's last scrape (every 250 ms here). So a count n reads as a value in
// [n, n * f], f computed from the scrape timestamps Prometheus holds, the way it extrapolates;
// the test checks that this still tells every count it expects from one less. A series that
// appeared at its first increment (a relay without counters started at zero) reads 0, not 1.
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { ERROR_CODES, MAX_TEXT_BYTES, USER_AGENT } from "@duet/protocol";
import { ANSWER_TIME_PATHS } from "@duet/protocol/endpoint-docs";
import { figures } from "./support/figures";
import { startPrometheus, type RunningPrometheus, type Sample } from "./support/prometheus";
import { ROOT, startTopology, type Topology } from "./support/topology";

interface Panel {
  type: string;
  title: string;
  targets?: { refId: string; expr: string }[];
}
const DASHBOARD = JSON.parse(readFileSync(join(ROOT, "infra/grafana/duet-dashboard.json"), "utf8")) as {
  panels: Panel[];
};
const PANELS = DASHBOARD.panels.filter((p) => p.type !== "row");
const JOB = "duet";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let topology: Topology;
let stopTopology: (() => Promise<void>) | undefined;
let prometheus: RunningPrometheus | undefined;
/** Unix seconds before the first relay started: every range below reaches back to it. */
let startedAt: number;
/** When the dashboard is evaluated (Unix seconds), the range that covers the whole run, and f. */
let evaluatedAt: number;
let rangeSeconds: number;
let extrapolation: number;
const SCRAPE_MS = 250;
/** Requests the workload made, by route label, and error answers by code. */
const requests = new Map<string, number>();
const errors = new Map<string, number>(ERROR_CODES.map((code) => [code, 0]));
const answered = new Map<string, number>();
let messages = 0;
let textBytes = 0;
/** The dashboard's connection panel, evaluated while a recv and a stream were held. */
let whileHeld: Sample[][] = [];
let workloadSeconds = 0;
/** Redis reconnects by connection, summed over the relays' own /metrics after the kill. */
let reconnectsMade = { commands: 0, subscriber: 0 };

/** Every relay's duet_redis_reconnects_total, read from the relay itself, by connection. */
async function relayReconnects(): Promise<{ commands: number; subscriber: number }> {
  const sum = { commands: 0, subscriber: 0 };
  for (const relay of topology.replicas) {
    const text = await (await fetch(`http://${relay.metricsAddress}/metrics`)).text();
    for (const [, connection, value] of text.matchAll(/^duet_redis_reconnects_total\{connection="(\w+)"\} (\d+)$/gm))
      if (connection === "commands" || connection === "subscriber") sum[connection] += Number(value);
  }
  return sum;
}

/** The dashboard's expression as Grafana sends it, for a range covering the whole run. */
function expand(expr: string, rangeSeconds: number): string {
  return expr
    .replaceAll("$job", JOB)
    .replaceAll("$__rate_interval", `${rangeSeconds}s`)
    .replaceAll("$__range", `${rangeSeconds}s`);
}

/** One command to the topology's Redis, over RESP: its first reply line. */
function redis(...args: string[]): Promise<string> {
  const { hostname, port } = new URL(topology.redis);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let reply = "";
    socket.setTimeout(5000, () => socket.destroy(new Error(`redis ${args.join(" ")}: no answer`)));
    socket.once("error", reject);
    socket.on("data", (d) => {
      reply += d;
      if (reply.includes("\r\n")) {
        socket.end();
        resolve(reply.slice(0, reply.indexOf("\r\n")));
      }
    });
    socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`);
  });
}

interface CallOptions {
  token?: string;
  body?: unknown;
  rawBody?: string;
  userAgent?: string;
}

/** A call through nginx, tallied under the route label the relay gives it, its status and its error. */
async function attempt(route: string, method: "GET" | "POST", path: string, options: CallOptions = {}) {
  const headers: Record<string, string> = { "user-agent": options.userAgent ?? USER_AGENT };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.rawBody !== undefined || options.body !== undefined) {
    headers["content-type"] = "application/json";
    body = options.rawBody ?? JSON.stringify(options.body);
  }
  const res = await fetch(`${topology.url}${path}`, { method, headers, body });
  const parsed = (await res.json()) as any;
  requests.set(route, (requests.get(route) ?? 0) + 1);
  answered.set(`${route} ${res.status}`, (answered.get(`${route} ${res.status}`) ?? 0) + 1);
  if (typeof parsed.error === "string") errors.set(parsed.error, (errors.get(parsed.error) ?? 0) + 1);
  return { status: res.status, body: parsed };
}

/** A call that must answer `status` (and, for an error, `error`). */
async function call(
  route: string,
  method: "GET" | "POST",
  path: string,
  expected: { status: number; error?: string },
  options: CallOptions = {},
): Promise<any> {
  const { status, body } = await attempt(route, method, path, options);
  expect({ route, status, error: body.error }).toEqual({ route, ...expected });
  return body;
}

/** How many calls of a route answered a status. */
const answers = (route: string, status: number) => answered.get(`${route} ${status}`) ?? 0;

async function send(
  token: string,
  code: string,
  text: string,
  expected: { status: number; error?: string } = { status: 200 },
  key?: string,
) {
  const body = await call("/v1/send", "POST", "/v1/send", expected, {
    token,
    body: { code, text, ...(key ? { idempotency_key: key } : {}) },
  });
  if (expected.status === 200) {
    messages++;
    textBytes += Buffer.byteLength(text);
  }
  return body;
}

/** Evaluates a panel's expressions (at `time`, default now). */
const evaluate = (panel: Panel, range: number, time?: number) =>
  Promise.all(panel.targets!.map((t) => prometheus!.query(expand(t.expr, range), time)));

const panel = (title: string) => {
  const found = PANELS.find((p) => p.title === title);
  if (!found) throw new Error(`no panel "${title}" in the dashboard`);
  return found;
};

/** Polls until check(value) holds, for at most 20 s (a guard against a hang, not a timing claim). */
async function until<T>(what: string, read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  let value = await read();
  for (const deadline = Date.now() + 20_000; !check(value); value = await read()) {
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after 20 s`);
    await sleep(250);
  }
  return value;
}

const total = (samples: Sample[]) => samples.reduce((sum, s) => sum + s.value, 0);

/** A counter's value as rate()/increase() over the whole run show it: n reads in [n, n * f]. */
const counted = (value: number, n: number) => value >= n - 0.001 && value <= n * extrapolation + 0.001;

beforeAll(async () => {
  startedAt = Math.floor(Date.now() / 1000) - 1;
  ({ topology, stop: stopTopology } = await startTopology(
    {
      // Eight room creations or guesses (open, join, a wrong token) per address in ten
      // minutes, the ninth refused; three rooms opened by one address live at once, the
      // fourth refused.
      RATE_LIMIT_ROOMS: "8",
      ROOMS_PER_IP: "3",
      RATE_LIMIT_WINDOW_SECONDS: "600",
      RATE_LIMIT_REQUESTS: "1000",
      // Two waiting calls per address a relay: the held recv and stream below fit, and seven
      // held self-tests at once cannot (three relays): too_many_waiters.
      MAX_WAITERS_PER_CLIENT: "2",
      WAKE_RECHECK_SECONDS: "60",
      // The slow client below is answered 408 after 2 s instead of 20.
      HEADERS_TIMEOUT_MS: "2000",
      // Every 250 ms scrape renders afresh: the panels are read from a scrape after the
      // workload, which a render cached earlier than its end would not count.
      METRICS_CACHE_MS: "0",
      // The workload's answers are what is counted: on a loaded CI machine Redis replied
      // slower than the default 1.5 s deadline and a call meant to succeed answered 503.
      REDIS_COMMAND_TIMEOUT_MS: "4000",
    },
    170,
  ));
  prometheus = await startPrometheus(
    [
      `global: { scrape_interval: ${SCRAPE_MS}ms, scrape_timeout: ${SCRAPE_MS}ms, evaluation_interval: 1s }`,
      "scrape_configs:",
      `  - job_name: ${JOB}`,
      "    static_configs:",
      `      - targets: [${topology.replicas.map((r) => `"${r.metricsAddress}"`).join(", ")}]`,
      "",
    ].join("\n"),
  );
  // Every relay scraped once before the first call: the counters' first samples are zeros.
  await until(
    "relays up",
    async () => total(await prometheus!.query(`up{job="${JOB}"}`)),
    (up) => up === 3,
  );

  const started = Date.now();
  // Room A (plain) and its seats; a third seat is one too many.
  const a = await call("/v1/open", "POST", "/v1/open", { status: 200 }, { body: {} });
  const b = await call("/v1/join", "POST", "/v1/join", { status: 200 }, { body: { code: a.code } });
  await call("/v1/join", "POST", "/v1/join", { status: 409, error: "full" }, { body: { code: a.code } });
  // Room E (end-to-end encrypted): it stays open to the end.
  const e = await call("/v1/open", "POST", "/v1/open", { status: 200 }, { body: { e2e: true } });
  await call("/v1/join", "POST", "/v1/join", { status: 200 }, { body: { code: e.code } });
  // A wrong token, while the room budget lasts: past it a guess is answered 429 like a join.
  await call(
    "/v1/recv",
    "GET",
    `/v1/recv?code=${a.code}&wait=0`,
    { status: 401, error: "unauthorized" },
    {
      token: "not-a-seat-token",
    },
  );
  // A third room from this address, then a fourth while three are open: too_many_rooms.
  await call("/v1/open", "POST", "/v1/open", { status: 200 }, { body: {} });
  await call("/v1/open", "POST", "/v1/open", { status: 429, error: "too_many_rooms" }, { body: {} });
  // Then the room creations run out. The limit is counted in Redis and a call whose count
  // takes over 500 ms is let through (it fails open: rate-limit.ts), as one may on a loaded
  // machine: open until one is rate_limited (each counted as it answered; the ones let
  // through meet the room budget instead).
  for (
    let opens = 1;
    (await attempt("/v1/open", "POST", "/v1/open", { body: {} })).status !== 429 || errors.get("rate_limited") === 0;
    opens++
  ) {
    if (opens >= 10) throw new Error("ten opens past the room limit and none rate_limited");
  }
  expect(answers("/v1/open", 200) + answers("/v1/open", 429)).toBe(requests.get("/v1/open"));
  // A generic library's User-Agent.
  await call(
    "/v1/open",
    "POST",
    "/v1/open",
    { status: 403, error: "forbidden" },
    { body: {}, userAgent: "curl/8.5.0" },
  );

  // Seven messages a -> b; a key reused with another text is a conflict.
  await send(a.token, a.code, "message 1", { status: 200 }, "k1");
  await send(a.token, a.code, "another text", { status: 409, error: "idempotency_conflict" }, "k1");
  for (let i = 2; i <= 7; i++) await send(a.token, a.code, `message ${i}`);
  await call("/v1/send", "POST", "/v1/send", { status: 400, error: "bad_request" }, { token: a.token, rawBody: "{" });
  await send(a.token, a.code, "x".repeat(MAX_TEXT_BYTES + 1), { status: 400, error: "too_large" });
  await send(e.token, e.code, "not an envelope", { status: 400, error: "e2e_required" });
  await call("/v1/send", "GET", "/v1/send", { status: 405, error: "method_not_allowed" });
  // A slow client straight at a replica (nginx forwards only whole requests): its headers never
  // finish, and past HEADERS_TIMEOUT_MS the relay answers the JSON 408 itself, outside Express.
  const address = topology.replicas[0]!.address;
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(
      Number(address.slice(address.lastIndexOf(":") + 1)),
      address.slice(0, address.lastIndexOf(":")),
    );
    let text = "";
    socket.on("connect", () => socket.write("GET /healthz HTTP/1.1\r\nHost: relay\r\n"));
    socket.on("data", (chunk) => {
      text += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(text));
  });
  expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  expect(answer).toContain('"error":"request_timeout"');
  errors.set("request_timeout", errors.get("request_timeout")! + 1);

  // Agents connected: a recv held by seat a and a stream open for seat b, as the dashboard shows them.
  const stream = new AbortController();
  const streaming = fetch(`${topology.url}/v1/stream?code=${a.code}&format=ndjson`, {
    headers: { "user-agent": USER_AGENT, authorization: `Bearer ${b.token}` },
    signal: stream.signal,
  });
  const held = call(
    "/v1/recv",
    "GET",
    `/v1/recv?code=${a.code}&wait=25000`,
    { status: 200 },
    {
      token: a.token,
    },
  );
  const connected = panel("Waiting recvs and open streams, per relay");
  whileHeld = await until(
    "a held recv and an open stream on the dashboard",
    // Half a second back, as below; a scrape that timed out (stale for that moment) is waited out.
    () => evaluate(connected, 5, Date.now() / 1000 - 0.5),
    (shown) => shown.every((samples) => samples.length === 3 && total(samples) === 1),
  );
  expect((await streaming).status).toBe(200);
  await send(b.token, a.code, "wake up");
  expect((await held).messages).toEqual([expect.objectContaining({ text: "wake up" })]);
  stream.abort();
  requests.set("/v1/stream", 1);
  // Seven self-tests held at once from this address, on three relays holding two each: at
  // least one is too_many_waiters (each counted as it answered).
  const selftests = await Promise.all(
    Array.from({ length: 7 }, () => attempt("/v1/selftest", "GET", "/v1/selftest?mode=longpoll&wait=3000")),
  );
  expect(selftests.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(1);
  for (const r of selftests) expect(r.status === 200 || r.body.error === "too_many_waiters").toBe(true);
  // The room holds eight unacked messages now (both directions): a ninth does not fit.
  await send(a.token, a.code, "message 8", { status: 429, error: "mailbox_full" });

  const got = await call("/v1/recv", "GET", `/v1/recv?code=${a.code}&wait=0`, { status: 200 }, { token: b.token });
  await call(
    "/v1/ack",
    "POST",
    "/v1/ack",
    { status: 200 },
    { token: b.token, body: { code: a.code, ids: [got.messages[0].id] } },
  );
  await call(
    "/v1/close",
    "POST",
    "/v1/close",
    { status: 409, error: "unread" },
    { token: a.token, body: { code: a.code } },
  );
  await call(
    "/v1/close",
    "POST",
    "/v1/close",
    { status: 200 },
    { token: a.token, body: { code: a.code, force: true } },
  );
  await call("/v1/status", "GET", `/v1/status?code=${a.code}`, { status: 404, error: "not_found" }, { token: a.token });

  // Redis stops taking writes for 6 s (every call is a script): one call waits out its
  // command timeout (4 s here) and answers 503.
  expect(await redis("CLIENT", "PAUSE", "6000", "WRITE")).toBe("+OK");
  const paused = Date.now();
  await call(
    "/v1/status",
    "GET",
    `/v1/status?code=${e.code}`,
    { status: 503, error: "unavailable" },
    { token: e.token },
  );
  await sleep(Math.max(0, 6200 - (Date.now() - paused)));
  // Every relay's connections cut at once: each reconnects by itself.
  expect(await redis("CLIENT", "KILL", "TYPE", "normal")).toMatch(/^:[1-9]/);
  expect(await redis("CLIENT", "KILL", "TYPE", "pubsub")).toMatch(/^:[1-9]/);
  // Each relay's two connections reconnect at least once; a connection whose heartbeat went
  // unanswered behind the paused write may have been replaced once more, so what Prometheus
  // must show is what the relays themselves count, read from each relay's /metrics.
  await until("the relays reconnected", relayReconnects, (n) => n.commands >= 3 && n.subscriber >= 3);
  reconnectsMade = await relayReconnects();
  await until(
    "Prometheus saw the reconnects",
    async () => total(await prometheus!.query(`duet_redis_reconnects_total{job="${JOB}"}`)),
    (n) => n === reconnectsMade.commands + reconnectsMade.subscriber,
  );
  workloadSeconds = (Date.now() - started) / 1000;

  // Every relay scraped, successfully, after the last call: the dashboard is evaluated at a
  // moment when every relay's latest scrape succeeded and came after the workload.
  const done = Date.now() / 1000;
  evaluatedAt = await until(
    "a successful scrape of every relay after the workload",
    async () => {
      // Half a second back: every scrape that started before then has been stored.
      const at = Date.now() / 1000 - 0.5;
      const stamps = await prometheus!.query(`timestamp(up{job="${JOB}"} == 1)`, at);
      return stamps.length === 3 && stamps.every((s) => s.value > done) ? at : 0;
    },
    (at) => at > 0,
  );
  rangeSeconds = Math.ceil(evaluatedAt - startedAt);
  // f, for each relay as Prometheus extrapolates its counters: from the timestamps of one of
  // them (every counter of a relay has a sample at each successful scrape, from the first).
  const scrapes = await prometheus.samples(`duet_rooms_opened_total{job="${JOB}"}[${rangeSeconds}s]`, evaluatedAt);
  expect(scrapes).toHaveLength(3);
  extrapolation = Math.max(
    ...scrapes.map(({ values }) => {
      const first = values[0]![0];
      const last = values.at(-1)![0];
      const sampled = last - first;
      const average = sampled / (values.length - 1);
      const toEnd = evaluatedAt - last;
      return (sampled + (toEnd < 1.1 * average ? toEnd : average / 2)) / sampled;
    }),
  );
}, 120_000);

afterAll(async () => {
  figures.record("prometheus", "workload through nginx (s)", Math.round(workloadSeconds * 10) / 10);
  figures.record(
    "prometheus",
    "calls made",
    [...requests.values()].reduce((x, y) => x + y, 0),
  );
  figures.record("prometheus", "extrapolation bound f", extrapolation);
  await prometheus?.stop();
  await stopTopology?.();
}, 30_000);

/** What each panel must show after the workload, by panel title. */
const EXPECTATIONS: Record<string, (results: Sample[][]) => void> = {
  "Relays up, of those Prometheus discovers": ([up, discovered]) => {
    expect(up!.map((s) => s.value)).toEqual([3]);
    expect(discovered!.map((s) => s.value)).toEqual([3]);
  },
  "Up, per relay": ([up]) => {
    expect(Object.fromEntries(up!.map((s) => [s.metric.instance, s.value]))).toEqual(
      Object.fromEntries(topology.replicas.map((r) => [r.metricsAddress, 1])),
    );
  },
  "Waiting recvs and open streams, per relay": (atEnd) => {
    // While held: one recv and one stream, each on one relay, the others at 0.
    const [recvs, streams] = whileHeld;
    for (const samples of [recvs!, streams!]) {
      expect(samples.map((s) => s.metric.instance).sort()).toEqual(
        topology.replicas.map((r) => r.metricsAddress).sort(),
      );
      expect(samples.map((s) => s.value).sort()).toEqual([0, 0, 1]);
    }
    // Afterwards, none.
    expect(atEnd.map(total)).toEqual([0, 0]);
  },
  "Rooms open and rooms expired, relay-wide": ([open, expired]) => {
    // Room E, and any room opened past the limit while it failed open.
    expect(open!.map((s) => s.value)).toEqual([answers("/v1/open", 200) - answers("/v1/close", 200)]);
    expect(expired!.map((s) => s.value)).toEqual([0]);
  },
  "Error answers by code, in the selected time range": ([byCode]) => expectErrorsByCode(byCode!),
  "Error answers by code, per interval": ([byCode]) => expectErrorsByCode(byCode!),
  "5xx answers by route and status, per interval": ([fivexx]) => {
    const shown = Object.fromEntries(fivexx!.map((s) => [`${s.metric.status} ${s.metric.route}`, s.value]));
    expect(counted(shown["503 /v1/status"] ?? 0, 1)).toBe(true);
    const others = Object.entries(shown).filter(([key, value]) => key !== "503 /v1/status" && value !== 0);
    expect(others).toEqual([]);
    expect(Object.keys(shown).length).toBeGreaterThan(10); // every route's 500 and 503, at zero
  },
  "Redis: connection errors and reconnects, per interval": ([connectionErrors, reconnects]) => {
    expect(connectionErrors!.map((s) => s.metric.connection).sort()).toEqual(["commands", "subscriber"]);
    const byConnection = Object.fromEntries(reconnects!.map((s) => [s.metric.connection, s.value]));
    expect(Object.keys(byConnection).sort()).toEqual(["commands", "subscriber"]);
    expect([
      counted(byConnection.commands!, reconnectsMade.commands),
      counted(byConnection.subscriber!, reconnectsMade.subscriber),
    ]).toEqual([true, true]);
  },
  "Answer time p99: the calls that never wait": ([p99]) => expectAnswerTimes(p99!),
  "Answer time p50: the calls that never wait": ([p50]) => expectAnswerTimes(p50!),
  "Requests per second by route": ([byRoute]) => {
    const shown = Object.fromEntries(byRoute!.map((s) => [s.metric.route, s.value * range()]));
    for (const route of ["/metrics", "/healthz", "/readyz"]) expect(shown[route]).toBeUndefined();
    const wrong = Object.entries(shown)
      .filter(([route, value]) => !counted(value, requests.get(route) ?? 0))
      .map(([route, value]) => ({ route, shown: value, made: requests.get(route) ?? 0 }));
    expect(wrong).toEqual([]);
    for (const route of requests.keys()) expect(shown[route]).toBeDefined();
  },
  "Rooms per second": ([opened, joined, closed]) => {
    const shown = [opened, joined, closed].map((s) => total(s!) * range());
    const made = [answers("/v1/open", 200), answers("/v1/join", 200), answers("/v1/close", 200)];
    expect({ shown, match: made.map((n, i) => counted(shown[i]!, n)) }).toEqual({
      shown,
      match: [true, true, true],
    });
  },
  "Messages accepted per second": ([accepted]) => {
    expect(counted(total(accepted!) * range(), messages)).toBe(true);
  },
  "Text accepted per second": ([bytes]) => {
    expect(counted(total(bytes!) * range(), textBytes)).toBe(true);
  },
  "CPU per relay": ([cpu]) => perRelay(cpu!, (v) => v > 0 && v < 2),
  "Event-loop delay p99 per relay": ([lag]) => perRelay(lag!, (v) => v >= 0 && v < 1),
  "Resident memory per relay": ([rss]) => perRelay(rss!, (v) => v > 20e6 && v < 512 * 2 ** 20),
  "File descriptors in use per relay, of its limit": ([fds]) => perRelay(fds!, (v) => v > 0 && v < 1),
};

const range = () => rangeSeconds;

function expectErrorsByCode(byCode: Sample[]) {
  const shown = Object.fromEntries(byCode.map((s) => [s.metric.code, s.value]));
  // Every code of the catalogue, each as often as the workload caused it: once each, the first
  // of its kind on its node; internal never.
  expect(Object.keys(shown).sort()).toEqual([...ERROR_CODES].sort());
  const wrong = ERROR_CODES.filter((code) => !counted(shown[code]!, errors.get(code)!)).map((code) => ({
    code,
    shown: shown[code],
    caused: errors.get(code),
  }));
  expect(wrong).toEqual([]);
  expect(errors.get("internal")).toBe(0);
  // Every code the workload can cause on Redis was caused (insufficient_storage is the
  // in-process store's), most of them once: the first of its kind on its node.
  const notCaused = ERROR_CODES.filter((code) => errors.get(code) === 0);
  expect(notCaused.sort()).toEqual(["insufficient_storage", "internal"]);
}

function expectAnswerTimes(samples: Sample[]) {
  const shown = Object.fromEntries(samples.map((s) => [s.metric.route, s.value]));
  // The room calls that never wait (the endpoint table's): the panels select them by method="POST" under /v1/.
  expect(Object.keys(shown).sort()).toEqual([...ANSWER_TIME_PATHS].sort());
  for (const [route, seconds] of Object.entries(shown)) {
    expect({ route, plausible: Number.isFinite(seconds) && seconds > 0 && seconds <= 26 }).toEqual({
      route,
      plausible: true,
    });
  }
}

function perRelay(samples: Sample[], plausible: (value: number) => boolean) {
  expect(samples.map((s) => s.metric.instance).sort()).toEqual(topology.replicas.map((r) => r.metricsAddress).sort());
  for (const s of samples)
    expect({ instance: s.metric.instance, value: s.value, plausible: plausible(s.value) }).toEqual({
      instance: s.metric.instance,
      value: s.value,
      plausible: true,
    });
}

test("every panel of the dashboard has an expectation here, and every expression parses", async () => {
  expect(PANELS.map((p) => p.title).filter((title) => !EXPECTATIONS[title])).toEqual([]);
  for (const p of PANELS) for (const t of p.targets ?? []) await prometheus!.query(expand(t.expr, 60));
});

test("the comparison tells every count the workload made from one less", () => {
  const largest = Math.max(...requests.values(), ...errors.values(), messages);
  expect({ extrapolation, tellsApart: (largest - 1) * extrapolation < largest }).toEqual({
    extrapolation,
    tellsApart: true,
  });
});

test.each(PANELS.map((p) => p.title))("%s: data matching the workload", async (title) => {
  const results = await evaluate(panel(title), rangeSeconds, evaluatedAt);
  EXPECTATIONS[title]!(results);
});
