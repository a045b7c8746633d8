// What the `strangers` scenarios (src/strangers.ts) share: client addresses through the
// relay's trusted proxy (X-Forwarded-For), rooms opened for a party, a bystander's calls
// timed, held raw calls (a recv, a stream, a self-test or an idle socket that the stranger
// keeps open), readiness and RSS sampled while they are held.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { Client, Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { inBatches } from "./client.js";
import { duetEnv } from "./processes.js";
import { summarize } from "./stats.js";

/**
 * A relay node's environment for these scenarios: the bench's (duetEnv) with the product's
 * own rate limits, room budget and per-address bounds (the bench turns them off elsewhere) and X-Forwarded-For
 * trusted from loopback, so that each party of the run is a client address of its own.
 */
export function strangerEnv(redisUrl: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  const env = duetEnv(redisUrl ?? "", { TRUST_PROXY: "1", LOG_LEVEL: "warn", ...extra });
  // The product's per-address bounds too, which duetEnv turns off for a load generator.
  for (const key of [
    "RATE_LIMIT_REQUESTS",
    "RATE_LIMIT_ROOMS",
    "ROOMS_PER_IP",
    "MAX_WAITERS_PER_CLIENT",
    "MAX_CONNECTIONS_PER_IP",
  ])
    if (!(key in extra)) delete env[key];
  // No REDIS_URL: the in-process store.
  if (redisUrl === undefined) delete env.REDIS_URL;
  return env;
}

let nextParty = 1;
/** A fresh IPv4 client address (10.x.y.z), one per party of the run. */
export function freshAddress(): string {
  const n = nextParty++;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** A fresh IPv6 /56 (2001:db8:<run>:<n>00::/56) and the i-th address in it: what one client owns. */
export function freshPrefix56(): (i: number) => string {
  const n = nextParty++;
  const hi = (n >> 8) & 0xffff;
  const byte = (n & 255).toString(16).padStart(2, "0");
  return (i) =>
    `2001:db8:${hi.toString(16)}:${byte}${(i & 255).toString(16).padStart(2, "0")}:${((i >> 8) & 0xffff).toString(16)}:${((i * 7919) & 0xffff).toString(16)}::${(i & 0xffff).toString(16)}`;
}

/** A set of addresses taken in turn, so a bystander's loop stays under the per-address request limit. */
export function rotating(count: number): () => string {
  const addresses = Array.from({ length: count }, () => freshAddress());
  let i = 0;
  return () => addresses[i++ % count]!;
}

export interface Seat {
  code: string;
  token: string;
}

export interface Answer {
  status: number;
  ms: number;
  body: string;
  /** A failure below HTTP (refused, reset, timed out): its code or message. */
  error?: string;
}

/** One call from `address`; never throws (a failure below HTTP is status 0 with its error). */
export async function call(
  dispatcher: Pool | Client,
  method: "GET" | "POST",
  path: string,
  options: { address: string; token?: string; body?: unknown; timeoutMs?: number },
): Promise<Answer> {
  const headers: Record<string, string> = { "user-agent": USER_AGENT, "x-forwarded-for": options.address };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const body =
    options.body === undefined
      ? undefined
      : typeof options.body === "string"
        ? options.body
        : JSON.stringify(options.body);
  if (body !== undefined) headers["content-type"] = "application/json";
  const started = performance.now();
  try {
    const response = await dispatcher.request({
      method,
      path,
      headers,
      body,
      signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
    });
    const text = await response.body.text();
    return { status: response.statusCode, ms: performance.now() - started, body: text };
  } catch (error) {
    // undici's errors carry a string code; an AbortSignal timeout is a DOMException (a numeric code).
    const code = (error as { code?: unknown }).code;
    return {
      status: 0,
      ms: performance.now() - started,
      body: "",
      error: typeof code === "string" ? code : ((error as Error).name ?? String(error)),
    };
  }
}

/** One call on a connection of its own (a new client's first call: what a health check or a newcomer sees). */
export async function callFresh(
  origin: string,
  method: "GET" | "POST",
  path: string,
  options: { address: string; token?: string; body?: unknown; timeoutMs?: number; localAddress?: string },
): Promise<Answer> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const client = new Client(origin, {
    connectTimeout: timeoutMs,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    // A loopback source address of its own (127.0.0.2, say): another TCP client to the relay.
    localAddress: options.localAddress,
  });
  try {
    return await call(client, method, path, { ...options, timeoutMs });
  } finally {
    void client.destroy().catch(() => undefined);
  }
}

/** `status` or `status error-code` (or the socket error): how answers are tallied. */
export function answerKey(answer: Answer): string {
  if (answer.status === 0) return `failed ${answer.error}`;
  if (answer.status < 400) return String(answer.status);
  try {
    return `${answer.status} ${(JSON.parse(answer.body) as { error?: string }).error ?? ""}`.trim();
  } catch {
    return String(answer.status);
  }
}

export function tally(into: Record<string, number>, key: string): void {
  into[key] = (into[key] ?? 0) + 1;
}

export const tallyText = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([key, n]) => `${n} × ${key}`)
    .join(", ") || "none";

/** Rooms one opener address opens: open and join both count against RATE_LIMIT_ROOMS (60). */
const ROOMS_PER_OPENER = 25;

/**
 * `rooms` paired rooms (both seats), opened through `pool`; each opener address opens at most
 * ROOMS_PER_OPENER, under the product's room budgets (ROOMS_PER_IP 50, RATE_LIMIT_ROOMS 60).
 */
export async function openRooms(pool: Pool, rooms: number): Promise<Seat[]> {
  const openers = Array.from({ length: Math.ceil(rooms / ROOMS_PER_OPENER) }, () => freshAddress());
  const pairs = await inBatches(rooms, 16, async (i) => {
    const address = openers[Math.floor(i / ROOMS_PER_OPENER)]!;
    const opened = await call(pool, "POST", "/v1/open", { address, body: {} });
    if (opened.status !== 200) throw new Error(`open answered ${opened.status}: ${opened.body.slice(0, 200)}`);
    const a = JSON.parse(opened.body) as Seat;
    const joined = await call(pool, "POST", "/v1/join", { address, body: { code: a.code } });
    if (joined.status !== 200) throw new Error(`join answered ${joined.status}: ${joined.body.slice(0, 200)}`);
    const b = JSON.parse(joined.body) as Seat;
    return [
      { code: a.code, token: a.token },
      { code: b.code, token: b.token },
    ];
  });
  return pairs.flat();
}

/**
 * A request a stranger sends and keeps open, on a raw socket of its own (hundreds of them
 * cost the generator little): its status once the head arrives, and the body's bytes read
 * and dropped as they come (a bigwake answer is 12.6 MB). No request at all: an idle
 * TCP connection.
 */
export class HeldCall {
  status = 0;
  /** ms from the request's start to the answer's head, and to its end (a body with a length). */
  headMs = Number.NaN;
  doneMs = Number.NaN;
  bodyBytes = 0;
  connected = false;
  closed = false;
  error?: string;
  private head = "";
  private length = -1;
  private socket: Socket;
  private readonly started = performance.now();

  constructor(origin: string, request?: { path: string; address: string; token?: string }) {
    const { hostname, port } = new URL(origin);
    this.socket = connect({ host: hostname, port: Number(port), noDelay: true });
    this.socket.on("connect", () => {
      this.connected = true;
      if (!request) return;
      const auth = request.token ? `Authorization: Bearer ${request.token}\r\n` : "";
      this.socket.write(
        `GET ${request.path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUser-Agent: ${USER_AGENT}\r\nX-Forwarded-For: ${request.address}\r\n${auth}\r\n`,
      );
    });
    this.socket.on("data", (data: Buffer) => this.read(data));
    this.socket.on("error", (error: NodeJS.ErrnoException) => {
      this.error ??= error.code ?? error.message;
    });
    this.socket.on("close", () => {
      this.closed = true;
    });
  }

  private read(data: Buffer): void {
    if (this.status === 0) {
      this.head += data.toString("latin1");
      const end = this.head.indexOf("\r\n\r\n");
      if (end < 0) return;
      this.status = Number(this.head.slice(9, 12));
      this.headMs = performance.now() - this.started;
      const length = /\r\ncontent-length: *(\d+)/i.exec(this.head.slice(0, end));
      this.length = length ? Number(length[1]) : -1;
      this.bodyBytes = this.head.length - end - 4;
      this.head = "";
    } else {
      this.bodyBytes += data.length;
    }
    if (this.length >= 0 && this.bodyBytes >= this.length && Number.isNaN(this.doneMs))
      this.doneMs = performance.now() - this.started;
  }

  /** Open with no answer yet, or an answer whose body goes on (a stream): what the relay holds. */
  get held(): boolean {
    return !this.closed && Number.isNaN(this.doneMs) && (this.status === 0 || this.status === 200);
  }

  /** How the call stands: `held`, `status [error]` of an answer, or how the socket ended. */
  outcome(): string {
    if (this.held) {
      if (this.status === 200) return this.length >= 0 ? "200, body still coming" : "held (200, stream open)";
      return this.connected ? "held" : "connecting";
    }
    if (this.status !== 0) return `${this.status}${Number.isNaN(this.doneMs) ? " (cut)" : ""}`;
    return `closed before an answer${this.error ? ` (${this.error})` : ""}`;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** /readyz of every node every `everyMs` (one keep-alive connection each), until stopped. */
export function sampleReadiness(nodes: { name: string; url: string }[], everyMs = 250) {
  const samples: { atMs: number; node: string; status: number }[] = [];
  const pools = nodes.map((node) => new Pool(node.url, { connections: 1 }));
  let stopped = false;
  const loops = nodes.map(async (node, i) => {
    while (!stopped) {
      const answer = await call(pools[i]!, "GET", "/readyz", { address: "127.0.0.1", timeoutMs: 2000 });
      samples.push({ atMs: performance.now(), node: node.name, status: answer.status });
      await new Promise((r) => setTimeout(r, everyMs));
    }
  });
  return {
    samples,
    /** Each node's statuses sampled in [fromMs, toMs]. */
    between(fromMs: number, toMs: number): Record<string, Record<string, number>> {
      const out: Record<string, Record<string, number>> = {};
      for (const s of samples) {
        if (s.atMs < fromMs || s.atMs > toMs) continue;
        out[s.node] ??= {};
        tally(out[s.node]!, s.status === 0 ? "no answer" : String(s.status));
      }
      return out;
    },
    /** Each node's last status sampled at or before atMs. */
    at(atMs: number): Record<string, number> {
      const out: Record<string, number> = {};
      for (const s of samples) if (s.atMs <= atMs) out[s.node] = s.status;
      return out;
    },
    async stop(): Promise<void> {
      stopped = true;
      await Promise.all(loops);
      await Promise.all(pools.map((pool) => pool.destroy()));
    },
  };
}

/** A process's resident set (VmRSS) and its peak so far (VmHWM), bytes; undefined once it is gone. */
export function residentSet(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? Number.NaN) * 1024;
    return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
  } catch {
    return undefined;
  }
}

/** VmRSS every `everyMs` until stopped: the peak, and whether the process went away. */
export function sampleRss(pid: number, everyMs = 50) {
  let peak = 0;
  let gone = false;
  const timer = setInterval(() => {
    const now = residentSet(pid);
    if (!now) gone = true;
    else peak = Math.max(peak, now.rss);
  }, everyMs);
  return {
    get peak() {
      return peak;
    },
    get gone() {
      return gone;
    },
    stop: () => clearInterval(timer),
  };
}

/** Whether a process is still there. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A bystander's loop of calls until `untilMs` or `done()` (one call at a time, `pauseMs` apart): each
 * answer tallied and timed. The calls' paths and clients are the caller's.
 */
export async function loopUntil(
  untilMs: number,
  pauseMs: number,
  once: () => Promise<Answer>,
  done: () => boolean = () => false,
): Promise<{ answers: Record<string, number>; okMs: number[]; allMs: number[]; failed: number }> {
  const answers: Record<string, number> = {};
  const okMs: number[] = [];
  const allMs: number[] = [];
  let failed = 0;
  while (performance.now() < untilMs && !done()) {
    const answer = await once();
    tally(answers, answerKey(answer));
    allMs.push(answer.ms);
    if (answer.status === 200) okMs.push(answer.ms);
    else failed++;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  return { answers, okMs, allMs, failed };
}

export const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "–");
export const mb = (bytes: number) => (Number.isFinite(bytes) ? (bytes / 2 ** 20).toFixed(0) : "–");
export const yesNo = (ok: boolean) => (ok ? "**yes**" : "**no**");
export const latencyText = (samples: number[]) => {
  const s = summarize(samples);
  return `p50 ${ms(s.p50)} ms, p99 ${ms(s.p99)} ms, max ${ms(s.max)} ms (${s.count} calls)`;
};
