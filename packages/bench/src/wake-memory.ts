// `node dist/wake-memory.js [--recvs N] [--store memory|redis]`: what one large message
// costs a node when it wakes every waiting recv of one seat (issue 36). One duet node with
// --max-old-space-size=384 (the Deployment's), on the in-process store or our own Redis.
// One seat sends N waiting recvs (default 200; the node holds MAX_WAITERS_PER_SEAT of them,
// the rest are answered at once), then its peer sends one 2 MiB text of \u0001 control
// characters (12.6 MB of JSON per answer). Reports the node's RSS before and at its peak
// (sampled every 10 ms from /proc), and the longest recv (wait=0) of a bystander in another
// room, called one after another throughout. DUET_SERVER_DIST runs another build (as `ab`).
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { duetEnv, startRedis, startServer } from "./processes.js";
import { sleep } from "./stats.js";

const args = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1]! : fallback;
};
const RECVS = Number(option("--recvs", "200"));
const STORE = option("--store", "memory");

const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
const mib = (bytes: number) => Math.round(bytes / 2 ** 20);

async function main(): Promise<void> {
  const redis = STORE === "redis" ? await startRedis() : undefined;
  const env = duetEnv(redis?.url ?? "", { LOG_LEVEL: "warn", METRICS_CACHE_MS: "0" });
  if (!redis) delete env.REDIS_URL;
  const server = await startServer("duet", "duet-node.js", { env, execArgv: ["--max-old-space-size=384"] });
  const pool = new Pool(server.url, { connections: RECVS + 16, bodyTimeout: 0, headersTimeout: 0 });
  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const headers: Record<string, string> = { "user-agent": USER_AGENT };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const payload = typeof body === "string" ? body : body === undefined ? undefined : JSON.stringify(body);
    const res = await pool.request({ method: method as "GET", path, headers, body: payload });
    const text = await res.body.text();
    return { status: res.statusCode, text };
  };
  const room = async () => {
    const opened = JSON.parse((await call("POST", "/v1/open", undefined, {})).text);
    const joined = JSON.parse((await call("POST", "/v1/join", undefined, { code: opened.code })).text);
    return { code: opened.code as string, a: opened.token as string, b: joined.token as string };
  };
  const waiting = async () => {
    const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
    return Number(/^duet_recv_waiting (\d+)/m.exec(text)?.[1] ?? 0);
  };
  try {
    const seat = await room();
    const bystander = await room();
    // The seat's waiting recvs, each read to its end by this client.
    let answered = 0;
    let bytes = 0;
    // A connection the node drops (its slow-reader budget, CLIENT_UNSENT_BYTES_MAX) counts as "dropped".
    const recvs = Array.from({ length: RECVS }, () =>
      call("GET", `/v1/recv?code=${seat.code}&wait=25000`, seat.b).then(
        (r) => {
          answered++;
          bytes += r.text.length;
          return String(r.status);
        },
        () => {
          answered++;
          return "dropped";
        },
      ),
    );
    // Until every recv is either held or answered (the node's own count).
    while ((await waiting()) + answered < RECVS) await sleep(20);
    await sleep(200);
    const held = await waiting();
    (globalThis as { gc?: () => void }).gc?.();
    const before = rss(server.pid);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rss(server.pid));
    }, 10);
    // The bystander: recv wait=0 in its own room, one after another.
    let stop = false;
    let longest = 0;
    let calls = 0;
    const bystanding = (async () => {
      while (!stop) {
        const started = performance.now();
        await call("GET", `/v1/recv?code=${bystander.code}&wait=0`, bystander.b).catch(() => undefined);
        longest = Math.max(longest, performance.now() - started);
        calls++;
      }
    })();
    const heldBefore = held;
    const answeredBefore = answered;
    const body = `{"code":"${seat.code}","text":"${"\\u0001".repeat(2_097_152)}"}`;
    const sent = await call("POST", "/v1/send", seat.a, body);
    if (sent.status !== 200) throw new Error(`send: ${sent.status} ${sent.text.slice(0, 200)}`);
    const statuses = await Promise.all(recvs);
    await sleep(1000);
    stop = true;
    await bystanding;
    clearInterval(sampler);
    const after = rss(server.pid);
    const line = {
      store: STORE,
      build: process.env.DUET_SERVER_DIST ?? "current",
      recvs: RECVS,
      heldWhenSent: heldBefore,
      answeredAtOnce: answeredBefore,
      statuses: Object.fromEntries([...new Set(statuses)].map((s) => [s, statuses.filter((t) => t === s).length])),
      answerMiB: Math.round((bytes / 2 ** 20) * 10) / 10,
      rssBeforeMiB: mib(before),
      rssPeakMiB: mib(peak),
      growthMiB: mib(peak - before),
      rssAfterMiB: mib(after),
      bystanderCalls: calls,
      bystanderLongestMs: Math.round(longest),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  } finally {
    await pool.close();
    await server.stop();
    await redis?.stop();
  }
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
