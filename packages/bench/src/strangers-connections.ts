// strangers --only connections: can one address use up a node's file descriptors? One relay on
// Redis, started under an open-file limit (prlimit), the product's limits and MAX_WAITERS at its
// default. One address opens more idle TCP connections than the limit (sending nothing; any
// the relay closes are opened again, once a second at most each), and separately holds
// self-test long-polls (GET /v1/selftest?mode=longpoll&wait=25000); meanwhile another client
// calls /healthz, /readyz, `recv wait=0` and the metrics listener's /metrics in a loop, each on
// a new connection as a newcomer or a health check would. Calm first, for comparison.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { startRedis, startServer, type ServerProcess } from "./processes.js";
import {
  HeldCall,
  type Answer,
  answerKey,
  callFresh,
  freshAddress,
  openRooms,
  rotating,
  strangerEnv,
  tally,
  tallyText,
  yesNo,
} from "./strangers-kit.js";
import type { Section } from "./strangers.js";
import { sleep } from "./stats.js";

export interface ConnectionsOptions {
  smoke: boolean;
  nofile: number;
  idle: number;
  selftests: number;
  holdSeconds: number;
}

interface Phase {
  name: string;
  /** How the stranger's connections or calls stood at the end. */
  stranger: Record<string, number>;
  reopened: number;
  calls: Record<string, Record<string, number>>;
  failed: number;
  total: number;
}

/**
 * The other client's source address: a TCP client of its own (the stranger connects from
 * 127.0.0.1), trusted as a proxy so that its X-Forwarded-For parties count as themselves.
 */
const OTHER_SOURCE = "127.0.0.2";

/** The other client's loop: each kind of call in turn on a fresh connection, until the time is up. */
async function others(server: ServerProcess, seat: { code: string; token: string }, untilMs: number) {
  const rotate = rotating(10);
  const address = () => ({ address: rotate(), localAddress: OTHER_SOURCE });
  const calls: Record<string, Record<string, number>> = {};
  let failed = 0;
  let total = 0;
  const kinds: [string, () => Promise<Answer>][] = [
    ["healthz", () => callFresh(server.url, "GET", "/healthz", address())],
    ["readyz", () => callFresh(server.url, "GET", "/readyz", address())],
    [
      "recv wait=0",
      () => callFresh(server.url, "GET", `/v1/recv?code=${seat.code}&wait=0`, { ...address(), token: seat.token }),
    ],
    ["metrics", () => callFresh(server.metricsUrl!, "GET", "/metrics", address())],
  ];
  while (performance.now() < untilMs) {
    for (const [kind, once] of kinds) {
      const answer = await once();
      total++;
      if (answer.status !== 200) failed++;
      calls[kind] ??= {};
      tally(calls[kind]!, answerKey(answer));
    }
    await sleep(100);
  }
  return { calls, failed, total };
}

async function phase(
  name: string,
  server: ServerProcess,
  seat: { code: string; token: string },
  o: ConnectionsOptions,
  open: (() => HeldCall) | undefined,
  count: number,
): Promise<Phase> {
  const held: HeldCall[] = [];
  let reopened = 0;
  let stopping = false;
  try {
    for (let i = 0; open && i < count; i++) {
      held.push(open());
      // Connections opened in steps, as fast as the relay takes them.
      if (i % 200 === 199) await sleep(50);
    }
    // Whatever the relay closes is opened again, at most once a second per connection and
    // five times the count in all.
    const reopen = (async () => {
      while (open && !stopping) {
        await sleep(1000);
        for (const [i, c] of held.entries()) {
          if (stopping || !c.closed || reopened >= 5 * count) continue;
          held[i] = open();
          reopened++;
        }
      }
    })();
    await sleep(open ? 1000 : 0);
    const result = await others(server, seat, performance.now() + o.holdSeconds * 1000);
    stopping = true;
    await reopen;
    const stranger: Record<string, number> = {};
    for (const c of held) tally(stranger, c.outcome());
    return { name, stranger, reopened, ...result };
  } finally {
    stopping = true;
    for (const c of held) c.close();
    await sleep(500);
  }
}

export async function connections(o: ConnectionsOptions): Promise<Section> {
  const redis = await startRedis();
  let server: ServerProcess | undefined;
  const phases: Phase[] = [];
  let limits = "";
  try {
    // The stranger (127.0.0.1) is a direct client, bounded per address; the other client's
    // source is trusted like a balancer in front (exempt, its parties counted by X-Forwarded-For).
    server = await startServer("connections", "duet-node.js", {
      env: strangerEnv(redis.url, { TRUST_PROXY: OTHER_SOURCE }),
      nofile: o.nofile,
    });
    // What the relay runs under, as its /proc says (not as asked).
    limits =
      /^Max open files.*$/m.exec(readFileSync(`/proc/${server.pid}/limits`, "utf8"))?.[0].replace(/\s+/g, " ") ?? "";
    const pool = new Pool(server.url, { connections: 1 });
    const [mine] = await openRooms(pool, 1);
    await pool.destroy();
    const stranger = freshAddress();
    const url = server.url;
    if (!o.smoke) phases.push(await phase("calm", server, mine!, o, undefined, 0));
    phases.push(await phase(`${o.idle} idle TCP connections`, server, mine!, o, () => new HeldCall(url), o.idle));
    phases.push(
      await phase(
        `${o.selftests} self-test long-polls`,
        server,
        mine!,
        o,
        () => new HeldCall(url, { path: "/v1/selftest?mode=longpoll&wait=25000", address: stranger }),
        o.selftests,
      ),
    );
    if (!o.smoke)
      for (const p of phases)
        process.stderr.write(`connections ${p.name}: ${p.failed} of ${p.total} other calls failed\n`);
  } finally {
    await server?.stop();
    await redis.stop();
  }
  const rows = phases.map(
    (p) =>
      `| ${p.name} | ${p.name === "calm" ? "–" : `${tallyText(p.stranger)}; ${p.reopened} reopened`} | ${Object.entries(
        p.calls,
      )
        .map(([kind, t]) => `${kind}: ${tallyText(t)}`)
        .join("; ")} | **${p.failed}** of ${p.total} | ${yesNo(p.failed === 0)} |`,
  );
  return {
    name: "connections",
    title: "One address's connections against a node's open-file limit",
    markdown: [
      `One relay on Redis under an open-file limit of ${o.nofile} (prlimit, soft and hard; its /proc: "${limits}"), the product's limits, MAX_WAITERS at its default (auto: from that limit).`,
      `Each phase ${o.holdSeconds} s: one address holds its connections (idle ones send nothing; the relay's closed ones are opened again, once a second at most each, five times their count in all),`,
      "while another client (ten addresses in turn) calls /healthz, /readyz, `recv wait=0` and the metrics listener's /metrics in turn, 100 ms apart,",
      "each on a new connection (5 s timeout). A call fails when it is not answered 200. Target: none of the other client's calls fails.",
      "",
      "| phase | the stranger's connections at the end | the other client's calls | failed | none failed |",
      "|---|---|---|---|---|",
      ...rows,
    ].join("\n"),
    targets: phases
      .filter((p) => p.name !== "calm")
      .map((p) => ({ name: `connections, ${p.name}: none of the other client's calls failed`, ok: p.failed === 0 })),
  };
}
