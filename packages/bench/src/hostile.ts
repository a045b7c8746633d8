// `pnpm --filter @duet/bench hostile [baseline server dist] [--seconds N]`: what hostile
// bodies cost everyone else. One duet node on our own Redis (rate limits off, so every
// hostile body reaches the parser); a bystander calls GET /healthz one call at a time (5 ms
// apart) while two connections post bodies under the 13 MiB limit whose shape is the cost:
// an object of 1.15 million keys (on /v1/send without a token, and inside an MCP tools/call),
// 6.8 million nested arrays, a 2 MiB text written as \u0001 escapes (the largest legal body),
// an array of 2.7 million ids, and one 13 MB field name. The bystander's latency (p50, p99,
// max) is measured calm and under the flood, for the current build and, given a baseline
// dist (a copy of an older packages/server/dist placed in packages/server, as for `ab`), for
// that build too, in one run, phases interleaved. Also the node's own event-loop delay.
// Writes results/hostile.md (with --smoke: a short run of the current build, checked).
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { LOAD_CPU, duetEnv, pin, startRedis, startServer, type ServerProcess } from "./processes.js";
import { sleep, summarize } from "./stats.js";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const secondsArg = args.indexOf("--seconds");
const FLOOD_SECONDS = secondsArg >= 0 ? Number(args[secondsArg + 1]) : smoke ? 2 : 10;
const CALM_SECONDS = smoke ? 1 : 4;
const baselineDist = args.find((a, i) => !a.startsWith("--") && args[i - 1] !== "--seconds");
const HOSTILE_CONNECTIONS = 2;
const CODE = "k7dq-3mxa-9z2f";

interface Shape {
  name: string;
  path: string;
  headers?: Record<string, string>;
  body: Buffer;
}

function shapes(): Shape[] {
  const keys = (n: number) => Array.from({ length: n }, (_, i) => `"${i.toString(16)}":1`).join(",");
  const limit = 13 * 1024 * 1024 - 64;
  const depth = Math.floor(limit / 2);
  return [
    { name: "1.15M keys, /v1/send", path: "/v1/send", body: Buffer.from(`{${keys(1_150_000)}}`) },
    {
      name: "1.15M keys, /mcp tools/call",
      path: "/mcp",
      headers: { accept: "application/json, text/event-stream" },
      body: Buffer.from(
        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stats","arguments":{${keys(1_150_000)}}}}`,
      ),
    },
    {
      name: "6.8M nested arrays, /v1/open",
      path: "/v1/open",
      body: Buffer.from(`${"[".repeat(depth)}${"]".repeat(depth)}`),
    },
    {
      name: "2 MiB text as \\u0001 escapes, /v1/send",
      path: "/v1/send",
      body: Buffer.from(`{"code":"${CODE}","text":"${"\\u0001".repeat(2_097_152)}"}`),
    },
    {
      name: "2.7M ids, /v1/ack",
      path: "/v1/ack",
      body: Buffer.from(`{"code":"${CODE}","ids":[${'"1",'.repeat(Math.floor((limit - 40) / 4))}"1"]}`),
    },
    { name: "one 13 MB field name, /v1/open", path: "/v1/open", body: Buffer.from(`{"${"k".repeat(limit - 10)}":1}`) },
  ];
}

interface Phase {
  latency: { count: number; p50: number; p99: number; max: number };
  eldMaxMs: number;
  /** The node's CPU time over the phase's wall time (1 = one core busy). */
  cpu: number;
  hostile: Record<string, Record<string, number>>;
}

async function bystander(url: string, untilMs: number): Promise<number[]> {
  const pool = new Pool(url, { connections: 1, keepAliveTimeout: 60_000 });
  const samples: number[] = [];
  try {
    while (performance.now() < untilMs) {
      const started = performance.now();
      const response = await pool.request({ method: "GET", path: "/healthz", headers: { "user-agent": USER_AGENT } });
      await response.body.text();
      if (response.statusCode !== 200) throw new Error(`bystander: /healthz answered ${response.statusCode}`);
      samples.push(performance.now() - started);
      await sleep(5);
    }
  } finally {
    await pool.close();
  }
  return samples;
}

async function flood(url: string, bodies: Shape[], untilMs: number, tally: Phase["hostile"]): Promise<void> {
  const pool = new Pool(url, { connections: HOSTILE_CONNECTIONS, keepAliveTimeout: 60_000, bodyTimeout: 60_000 });
  try {
    await Promise.all(
      Array.from({ length: HOSTILE_CONNECTIONS }, async (_, worker) => {
        for (let i = worker; performance.now() < untilMs; i++) {
          const shape = bodies[i % bodies.length]!;
          const response = await pool.request({
            method: "POST",
            path: shape.path,
            headers: { "user-agent": USER_AGENT, "content-type": "application/json", ...shape.headers },
            body: shape.body,
          });
          const text = await response.body.text();
          tally[shape.name] ??= {};
          const row = tally[shape.name]!;
          const key =
            `${response.statusCode} ${text.length > 1000 ? `${(text.length / 1e6).toFixed(1)} MB` : ""}`.trim();
          row[key] = (row[key] ?? 0) + 1;
        }
      }),
    );
  } finally {
    await pool.close();
  }
}

async function phase(server: ServerProcess, bodies: Shape[] | undefined, seconds: number): Promise<Phase> {
  const before = await server.metrics({ resetEld: true });
  const started = performance.now();
  const until = started + seconds * 1000;
  const hostile: Phase["hostile"] = {};
  const [samples] = await Promise.all([
    bystander(server.url, until),
    bodies ? flood(server.url, bodies, until, hostile) : Promise.resolve(),
  ]);
  const metrics = await server.metrics({ resetEld: true });
  const cpuUs = metrics.cpuUserUs + metrics.cpuSystemUs - before.cpuUserUs - before.cpuSystemUs;
  const cpu = cpuUs / 1000 / (performance.now() - started);
  return { latency: summarize(samples), eldMaxMs: metrics.eldMaxMs, cpu, hostile };
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "–");

async function main(): Promise<void> {
  pin(process.pid, LOAD_CPU);
  const load = loadavg()[0]!.toFixed(1);
  const bodies = shapes();
  const redis = await startRedis();
  const servers: Record<string, ServerProcess> = {};
  try {
    servers.current = await startServer("duet (current)", "duet-node.js", {
      env: duetEnv(redis.url, { REDIS_KEY_PREFIX: "cur:", LOG_LEVEL: "warn" }),
    });
    if (baselineDist) {
      servers.baseline = await startServer("duet (baseline)", "duet-node.js", {
        env: duetEnv(redis.url, {
          REDIS_KEY_PREFIX: "base:",
          LOG_LEVEL: "warn",
          DUET_SERVER_DIST: resolve(baselineDist),
        }),
      });
    }
    const names = Object.keys(servers);
    const results: Record<string, { calm: Phase; flood: Phase }> = {};
    for (const name of names) await phase(servers[name]!, undefined, 0.5); // warm up
    // Calm and flood for each build in turn, so both see the same machine.
    for (const name of names) {
      const calm = await phase(servers[name]!, undefined, CALM_SECONDS);
      if (!smoke) process.stderr.write(`${name}: calm p99 ${ms(calm.latency.p99)} ms\n`);
      const flooded = await phase(servers[name]!, bodies, FLOOD_SECONDS);
      if (!smoke)
        process.stderr.write(`${name}: flood p99 ${ms(flooded.latency.p99)} ms, max ${ms(flooded.latency.max)} ms\n`);
      results[name] = { calm, flood: flooded };
    }
    const rows = names.flatMap((name) =>
      (["calm", "flood"] as const).map((when) => {
        const p = results[name]![when];
        return `| ${name} | ${when} | ${p.latency.count} | ${ms(p.latency.p50)} | ${ms(p.latency.p99)} | ${ms(p.latency.max)} | ${ms(p.eldMaxMs)} | ${Math.round(p.cpu * 100)} % |`;
      }),
    );
    const hostileRows = names.flatMap((name) =>
      bodies.map(
        (shape) =>
          `| ${name} | ${shape.name} | ${(shape.body.length / 1e6).toFixed(1)} MB | ${Object.entries(
            results[name]!.flood.hostile[shape.name] ?? {},
          )
            .map(([answer, count]) => `${count} × ${answer}`)
            .join(", ")} |`,
      ),
    );
    const report = [
      `# Hostile bodies: a bystander's latency`,
      "",
      `\`pnpm --filter @duet/bench hostile${baselineDist ? ` ${baselineDist}` : ""}\`: one duet node on Redis, rate limits off; a bystander's`,
      `GET /healthz, one at a time 5 ms apart, ${CALM_SECONDS} s calm then ${FLOOD_SECONDS} s while ${HOSTILE_CONNECTIONS} connections post the bodies below in turn.`,
      `${cpus().length} cores, loadavg ${load} at the start.`,
      "",
      "| build | phase | bystander calls | p50 ms | p99 ms | max ms | node's event-loop delay, max ms | node's CPU |",
      "|---|---|---|---|---|---|---|---|",
      ...rows,
      "",
      "| build | hostile body | size | answers (status, and size when over 1 kB) |",
      "|---|---|---|---|",
      ...hostileRows,
      "",
    ].join("\n");
    if (smoke) {
      const current = results.current!;
      const answered = Object.values(current.flood.hostile).reduce(
        (sum, row) => sum + Object.values(row).reduce((a, b) => a + b, 0),
        0,
      );
      if (current.flood.latency.count === 0 || answered === 0) throw new Error("hostile smoke: nothing measured");
      process.stdout.write(
        `hostile smoke: bystander p99 ${ms(current.calm.latency.p99)} ms calm, ${ms(current.flood.latency.p99)} ms under ${answered} hostile bodies\n`,
      );
      return;
    }
    const dir = join(__dirname, "..", "results");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "hostile.md"), report);
    process.stdout.write(`${report}\n`);
  } finally {
    await Promise.allSettled(Object.values(servers).map((s) => s.stop()));
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`hostile failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
