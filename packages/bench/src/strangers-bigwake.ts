// strangers --only bigwake: what one big message costs a node when one seat holds many waiting
// recvs. One relay (in-process store, then on Redis) with NODE_OPTIONS=--max-old-space-size=384;
// one seat sends as many `recv wait=25000` as the relay takes (each on a connection of its
// own, answers read as they come); its peer sends one 2 MiB text of U+0001 (JSON writes each
// as \u0001, six bytes: a 12.6 MB answer per recv that gets it). The relay's VmRSS is read
// every 50 ms; another client loops `recv wait=0` meanwhile.
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { startRedis, startServer, type RedisProcess, type ServerProcess } from "./processes.js";
import {
  HeldCall,
  alive,
  call,
  freshAddress,
  latencyText,
  loopUntil,
  mb,
  ms,
  openRooms,
  residentSet,
  rotating,
  sampleRss,
  strangerEnv,
  tally,
  tallyText,
  yesNo,
} from "./strangers-kit.js";
import type { Section } from "./strangers.js";
import { sleep, summarize } from "./stats.js";

export interface BigwakeOptions {
  smoke: boolean;
  /** Waiting recvs the one seat tries to hold. */
  recvs: number;
  /** The text's length in characters (2 MiB). */
  textChars: number;
}

const GROWTH_TARGET = 256 * 2 ** 20;
const BYSTANDER_TARGET_MS = 1000;

interface Run {
  store: string;
  placed: Record<string, number>;
  rssStart: number;
  rssBefore: number;
  rssPeak: number;
  hwm: number;
  send: { status: number; ms: number; error?: string };
  got: number;
  answers: Record<string, number>;
  bystander: Awaited<ReturnType<typeof loopUntil>>;
  relayExited: boolean;
}

async function oneRun(store: string, server: ServerProcess, o: BigwakeOptions): Promise<Run> {
  const pool = new Pool(server.url, { connections: 4, keepAliveTimeout: 60_000, bodyTimeout: 120_000 });
  const bystanderPool = new Pool(server.url, { connections: 1, keepAliveTimeout: 60_000 });
  const held: HeldCall[] = [];
  try {
    const [a, b, mine] = await openRooms(pool, 2);
    const stranger = freshAddress();
    const bystander = rotating(10);
    const rssStart = residentSet(server.pid)?.rss ?? Number.NaN;
    const rss = sampleRss(server.pid);
    for (let i = 0; i < o.recvs; i++)
      held.push(
        new HeldCall(server.url, { path: `/v1/recv?code=${a!.code}&wait=25000`, address: stranger, token: a!.token }),
      );
    await sleep(o.smoke ? 500 : 1500);
    // How the relay took them: held (no answer yet), or answered before any message (refused).
    const placed: Record<string, number> = {};
    for (const c of held) tally(placed, c.outcome());
    const before = residentSet(server.pid);
    let finished = false;
    // Until every held recv has its answer (or 30 s after the send), then one more second.
    const bystanderLoop = loopUntil(
      performance.now() + 180_000,
      20,
      () =>
        call(bystanderPool, "GET", `/v1/recv?code=${mine!.code}&wait=0`, {
          address: bystander(),
          token: mine!.token,
          timeoutMs: 10_000,
        }),
      () => finished,
    );
    const body = `{"code":"${b!.code}","text":"${"\\u0001".repeat(o.textChars)}"}`;
    const sent = await call(pool, "POST", "/v1/send", { address: stranger, token: b!.token, body, timeoutMs: 60_000 });
    const deadline = performance.now() + 60_000;
    while (held.some((c) => c.held) && performance.now() < deadline && alive(server.pid)) await sleep(50);
    await sleep(1000);
    finished = true;
    rss.stop();
    const bystanderResult = await bystanderLoop;
    const answers: Record<string, number> = {};
    let got = 0;
    for (const c of held) {
      if (c.status === 200 && c.bodyBytes > o.textChars) got++;
      else tally(answers, c.outcome());
    }
    return {
      store,
      placed,
      rssStart,
      rssBefore: before?.rss ?? Number.NaN,
      rssPeak: rss.peak,
      hwm: residentSet(server.pid)?.hwm ?? Number.NaN,
      send: { status: sent.status, ms: sent.ms, error: sent.error },
      got,
      answers,
      bystander: bystanderResult,
      relayExited: !alive(server.pid) || rss.gone,
    };
  } finally {
    for (const c of held) c.close();
    await Promise.all([pool.destroy(), bystanderPool.destroy()]);
  }
}

export async function bigwake(o: BigwakeOptions): Promise<Section> {
  const runs: Run[] = [];
  // The smoke: the in-process store only.
  for (const store of o.smoke ? (["in-process store"] as const) : (["in-process store", "Redis"] as const)) {
    let redis: RedisProcess | undefined;
    let server: ServerProcess | undefined;
    try {
      if (store === "Redis") redis = await startRedis();
      server = await startServer(`bigwake ${store}`, "duet-node.js", {
        env: strangerEnv(redis?.url, { NODE_OPTIONS: "--max-old-space-size=384" }),
      });
      const run = await oneRun(store, server, o);
      runs.push(run);
      if (!o.smoke)
        process.stderr.write(
          `bigwake ${store}: RSS ${mb(run.rssBefore)} -> peak ${mb(run.rssPeak)} MiB, ${run.got} got it, send ${run.send.status} in ${ms(run.send.ms)} ms\n`,
        );
    } finally {
      await server?.stop();
      await redis?.stop();
    }
  }
  const rows = runs.map((r) => {
    const growth = r.rssPeak - r.rssBefore;
    const by = summarize(r.bystander.allMs);
    return `| ${r.store} | ${tallyText(r.placed)} | ${mb(r.rssStart)} | ${mb(r.rssBefore)} | ${mb(r.rssPeak)} (VmHWM ${mb(r.hwm)}) | **${mb(growth)}** | ${r.send.status || r.send.error} in ${ms(r.send.ms)} ms | ${r.got} | ${tallyText(r.answers)} | ${latencyText(r.bystander.allMs)}; ${tallyText(r.bystander.answers)} | ${r.relayExited ? "**exited**" : "alive"} | ${yesNo(growth <= GROWTH_TARGET && !r.relayExited)} / ${yesNo(by.count > 0 && by.max <= BYSTANDER_TARGET_MS && r.bystander.failed === 0)} |`;
  });
  return {
    name: "bigwake",
    title: "One big message woken into many waiting recvs of one seat",
    markdown: [
      `One relay started with NODE_OPTIONS=--max-old-space-size=384, the product's limits, MAX_WAITERS at its default; one seat sends ${o.recvs}`,
      `\`recv wait=25000\` (each on a connection of its own, answers read as they come); ${o.smoke ? 0.5 : 1.5} s later its peer sends one text of ${o.textChars.toLocaleString("en")}`,
      "U+0001 characters (each written \\u0001 in JSON: six bytes). The relay's VmRSS is read every 50 ms; meanwhile another client (ten",
      "addresses in turn) loops `recv wait=0` on a room of its own, 20 ms apart. Growth is the sampled peak less the RSS just before the send.",
      `Targets: growth <= ${mb(GROWTH_TARGET)} MiB; the other client's recv at most ${BYSTANDER_TARGET_MS} ms, none failed.`,
      "",
      "| store | the seat's recvs, before the send | RSS at start MiB | RSS before the send MiB | peak MiB | growth MiB | the send | recvs that got it | the other recvs' answers | another client's recv wait=0 | relay | growth / other recv targets met |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|",
      ...rows,
    ].join("\n"),
    targets: runs.flatMap((r) => [
      {
        name: `bigwake, ${r.store}: RSS growth <= 256 MB`,
        ok: r.rssPeak - r.rssBefore <= GROWTH_TARGET && !r.relayExited,
      },
      {
        name: `bigwake, ${r.store}: another client's recv wait=0 <= 1 s throughout`,
        ok:
          r.bystander.allMs.length > 0 &&
          summarize(r.bystander.allMs).max <= BYSTANDER_TARGET_MS &&
          r.bystander.failed === 0,
      },
    ]),
  };
}
