// strangers --only waiters: can one client fill every node's waiter cap (MAX_WAITERS), so that
// another client's waiting recv is refused and /readyz takes every node out of service?
// Three nodes on one Redis and one node on the in-process store, each with MAX_WAITERS=cap.
// A stranger (one address, then one IPv6 /56 spread over many addresses) sends N waiting
// recvs, then N streams, spread over the nodes (two per seat per node: the streams' own
// per-seat bound), on seats of its own; meanwhile another address asks each node for a
// recv with wait=0 and a waiting recv answered by a send, and every node's /readyz is
// sampled during the hold and 5 s after it is in place.
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { startRedis, startServer, type ServerProcess } from "./processes.js";
import {
  HeldCall,
  call,
  freshAddress,
  freshPrefix56,
  ms,
  openRooms,
  sampleReadiness,
  strangerEnv,
  tally,
  tallyText,
  type Answer,
} from "./strangers-kit.js";
import type { Section } from "./strangers.js";
import { sleep } from "./stats.js";

export interface WaitersOptions {
  smoke: boolean;
  /** The stranger's waiting calls, spread over the nodes. */
  waiters: number;
  /** MAX_WAITERS of every node. */
  cap: number;
  /**
   * RATE_LIMIT_REQUESTS of the nodes. A stream is held as long as its client likes, so one
   * address places any number of them over a few windows of the default 600; the run raises
   * the limit to place them in one, so that only the waiter bounds decide.
   */
  requestsLimit: number;
  /** How long /readyz is sampled after the stranger's calls are in place (5 s). */
  afterSeconds: number;
}

interface NodeCheck {
  node: string;
  zero: Answer;
  waiting: Answer & { got: boolean; afterSendMs: number };
}

interface Run {
  store: string;
  addressing: string;
  kind: "recv" | "stream";
  outcomes: Record<string, number>;
  readyDuring: Record<string, Record<string, number>>;
  readyAt5s: Record<string, number>;
  readyAfterRelease: Record<string, number>;
  checks: NodeCheck[];
}

async function oneRun(
  store: string,
  nodes: ServerProcess[],
  addressing: "one address" | "one /56",
  kind: "recv" | "stream",
  o: WaitersOptions,
): Promise<Run> {
  const pools = nodes.map((node) => new Pool(node.url, { connections: 4, keepAliveTimeout: 60_000 }));
  const held: HeldCall[] = [];
  const readiness = sampleReadiness(nodes.map((node) => ({ name: node.name, url: node.url })));
  try {
    const perNode = Math.ceil(o.waiters / nodes.length);
    const seats = await openRooms(pools[0]!, Math.ceil(perNode / 2 / 2));
    const [mine, peer] = await openRooms(pools[0]!, 1);
    const bystander = freshAddress();
    const single = freshAddress();
    const prefix = freshPrefix56();
    const hostileAddress = addressing === "one address" ? () => single : prefix;
    await sleep(o.smoke ? 200 : 500);
    const startedMs = performance.now();
    for (let i = 0; i < o.waiters; i++) {
      const node = i % nodes.length;
      // Two calls per seat per node: a third stream of one seat on one node ends its oldest.
      const seat = seats[Math.floor(Math.floor(i / nodes.length) / 2)]!;
      const path =
        kind === "recv" ? `/v1/recv?code=${seat.code}&wait=25000` : `/v1/stream?code=${seat.code}&format=ndjson`;
      held.push(new HeldCall(nodes[node]!.url, { path, address: hostileAddress(i), token: seat.token }));
    }
    await sleep(o.smoke ? 500 : 1500);
    const placedMs = performance.now();
    const checks: NodeCheck[] = [];
    for (const [n, node] of nodes.entries()) {
      const pool = pools[n]!;
      const zero = await call(pool, "GET", `/v1/recv?code=${mine!.code}&wait=0`, {
        address: bystander,
        token: mine!.token,
      });
      const waiting = call(pool, "GET", `/v1/recv?code=${mine!.code}&wait=10000`, {
        address: bystander,
        token: mine!.token,
      });
      await sleep(300);
      const sendStarted = performance.now();
      const sent = await call(pool, "POST", "/v1/send", {
        address: bystander,
        token: peer!.token,
        body: { code: peer!.code, text: `ping ${n}` },
      });
      const answer = await waiting;
      const afterSendMs = performance.now() - sendStarted;
      const id = sent.status === 200 ? (JSON.parse(sent.body) as { id: string }).id : undefined;
      const got =
        answer.status === 200 &&
        (JSON.parse(answer.body) as { messages: { id: string }[] }).messages.some((m) => m.id === id);
      // Acked, so the next node's waiting recv waits again rather than finding it.
      if (id)
        await call(pool, "POST", "/v1/ack", {
          address: bystander,
          token: mine!.token,
          body: { code: mine!.code, ids: [id] },
        });
      checks.push({ node: node.name, zero, waiting: { ...answer, got, afterSendMs } });
    }
    await sleep(Math.max(0, placedMs + o.afterSeconds * 1000 - performance.now()));
    const endMs = performance.now();
    const outcomes: Record<string, number> = {};
    for (const c of held) tally(outcomes, c.outcome());
    for (const c of held) c.close();
    // Released: each node lets go of the stranger's calls, then is asked once more.
    const deadline = performance.now() + 5000;
    while (performance.now() < deadline) {
      const waiting = await Promise.all(nodes.map((node) => node.metrics().then((m) => m.waiting)));
      if (waiting.every((w) => w === 0)) break;
      await sleep(100);
    }
    const readyAfterRelease: Record<string, number> = {};
    for (const [n, node] of nodes.entries())
      readyAfterRelease[node.name] = (await call(pools[n]!, "GET", "/readyz", { address: bystander })).status;
    return {
      store,
      addressing,
      kind,
      outcomes,
      readyDuring: readiness.between(startedMs, endMs),
      readyAt5s: readiness.at(endMs),
      readyAfterRelease,
      checks,
    };
  } finally {
    for (const c of held) c.close();
    await readiness.stop();
    await Promise.all(pools.map((pool) => pool.destroy()));
  }
}

function targets(run: Run, o: WaitersOptions) {
  const label = `waiters, ${run.store}, ${run.addressing}, ${run.kind}s`;
  return [
    {
      name: `${label}: another address's recv wait=0 answered on every node`,
      ok: run.checks.every((c) => c.zero.status === 200),
    },
    {
      name: `${label}: another address's waiting recv got the send on every node`,
      ok: run.checks.every((c) => c.waiting.got),
    },
    {
      name: `${label}: every node ready (/readyz 200) in every sample during and ${o.afterSeconds} s after`,
      ok: Object.values(run.readyDuring).every((t) => Object.keys(t).every((k) => k === "200")),
    },
  ];
}

export async function waiters(o: WaitersOptions): Promise<Section> {
  const redis = await startRedis();
  const servers: ServerProcess[] = [];
  const runs: Run[] = [];
  try {
    const env = { MAX_WAITERS: String(o.cap), RATE_LIMIT_REQUESTS: String(o.requestsLimit) };
    const cluster: ServerProcess[] = [];
    for (let i = 0; i < 3; i++)
      cluster.push(await startServer(`redis-${i}`, "duet-node.js", { env: strangerEnv(redis.url, env) }));
    servers.push(...cluster);
    const memory = await startServer("memory", "duet-node.js", { env: strangerEnv(undefined, env) });
    servers.push(memory);
    for (const [store, nodes] of [
      ["3 nodes on Redis", cluster],
      ["1 node, in-process store", [memory]],
    ] as const) {
      for (const kind of ["recv", "stream"] as const) {
        for (const addressing of ["one address", "one /56"] as const) {
          // The smoke: one run of each store, recvs on Redis and streams in process.
          if (o.smoke && (kind === "recv") !== (nodes === cluster)) continue;
          if (o.smoke && (addressing === "one /56") !== (nodes === cluster)) continue;
          const run = await oneRun(store, [...nodes], addressing, kind, o);
          runs.push(run);
          if (!o.smoke)
            process.stderr.write(
              `waiters ${store}, ${addressing}, ${kind}s: ${tallyText(run.outcomes)}; readyz at the end ${JSON.stringify(run.readyAt5s)}\n`,
            );
        }
      }
    }
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await redis.stop();
  }
  const statusText = (t: Record<string, number>) => tallyText(t).replace(/ × /g, "×");
  const rows = runs.map((run) => {
    const nodes = run.checks.map((c) => c.node);
    return [
      `| ${run.store} | ${run.addressing} | ${run.kind}s | ${tallyText(run.outcomes)} |`,
      nodes.map((n) => `${n}: ${statusText(run.readyDuring[n] ?? {})}`).join("; "),
      `| ${nodes.map((n) => `${n}: ${run.readyAt5s[n] ?? "–"}`).join(", ")} | ${nodes.map((n) => `${n}: ${run.readyAfterRelease[n]}`).join(", ")} |`,
      run.checks.map((c) => `${c.node}: ${c.zero.status} in ${ms(c.zero.ms)} ms`).join("; "),
      "|",
      run.checks
        .map(
          (c) =>
            `${c.node}: ${c.waiting.got ? `got it ${ms(c.waiting.afterSendMs)} ms after the send` : `no (${c.waiting.status || c.waiting.error} after ${ms(c.waiting.ms)} ms)`}`,
        )
        .join("; "),
      "|",
    ].join(" ");
  });
  const allTargets = runs.flatMap((run) => targets(run, o));
  return {
    name: "waiters",
    title: "One client's waiters against every node's cap",
    markdown: [
      `MAX_WAITERS=${o.cap} on each node; a stranger sends ${o.waiters} waiting calls (\`recv wait=25000\`, then \`GET /v1/stream\`), spread evenly over the nodes,`,
      "two per seat per node, on rooms of its own, from one address or from one IPv6 /56 (a different address per call), through the relay's trusted proxy",
      `(TRUST_PROXY=1, X-Forwarded-For); the product's room budget and rate limits but RATE_LIMIT_REQUESTS=${o.requestsLimit} (streams are held for as long as their client likes: one address places 600 over two windows of the default 600 anyway). ${o.smoke ? 0.5 : 1.5} s after they are sent, another address calls each node:`,
      "`recv wait=0`, then a `recv wait=10000` that its peer's send (300 ms later) should answer. Every node's /readyz is sampled every 250 ms from",
      `the stranger's first call until ${o.afterSeconds} s after its calls are in place; then the stranger lets go and each node is asked once more.`,
      "",
      `| store | stranger | calls | the stranger's calls, ${o.afterSeconds} s after | /readyz during (each node) | /readyz at +${o.afterSeconds} s | /readyz after release | another address: recv wait=0 | another address: waiting recv + send |`,
      "|---|---|---|---|---|---|---|---|---|",
      ...rows,
    ].join("\n"),
    targets: allTargets,
  };
}
