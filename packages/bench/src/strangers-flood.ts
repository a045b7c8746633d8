// strangers --only flood: what a flood of a public document costs everyone else. One relay on
// Redis with the product's limits; one address asks GET /v1/openapi.json over 8 keep-alive
// connections with 16 requests pipelined on each, back to back, from a process of its own
// (at a lower priority, so the generator's CPU is not counted against the relay), while
// another client (ten addresses in turn, under the per-address request limit) loops
// `recv wait=0`, first calm and then under the flood, in one run.
import { type ChildProcess, fork } from "node:child_process";
import { setPriority } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { LOAD_CPU, pin, startRedis, startServer } from "./processes.js";
import {
  call,
  freshAddress,
  latencyText,
  loopUntil,
  ms,
  openRooms,
  rotating,
  strangerEnv,
  tally,
  tallyText,
  yesNo,
} from "./strangers-kit.js";
import type { Section } from "./strangers.js";
import { summarize } from "./stats.js";

export interface FloodOptions {
  smoke: boolean;
  calmSeconds: number;
  floodSeconds: number;
}

const CONNECTIONS = 8;
const PIPELINING = 16;
const PATH = "/v1/openapi.json";
const P50_MARGIN_MS = 50;

interface FloodJob {
  url: string;
  address: string;
  seconds: number;
}
interface FloodResult {
  answers: Record<string, number>;
  count: number;
  bytes: number;
  seconds: number;
}

/** In the flood's own process: CONNECTIONS × PIPELINING requests in flight until the time is up. */
async function flood(job: FloodJob): Promise<FloodResult> {
  const pool = new Pool(job.url, { connections: CONNECTIONS, pipelining: PIPELINING, keepAliveTimeout: 60_000 });
  const answers: Record<string, number> = {};
  let count = 0;
  let bytes = 0;
  const started = performance.now();
  const until = started + job.seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: CONNECTIONS * PIPELINING }, async () => {
        while (performance.now() < until) {
          try {
            const response = await pool.request({
              method: "GET",
              path: PATH,
              headers: { "user-agent": USER_AGENT, "x-forwarded-for": job.address },
            });
            const body = Buffer.from(await response.body.arrayBuffer());
            bytes += body.length;
            tally(answers, String(response.statusCode));
          } catch (error) {
            tally(answers, `failed ${(error as { code?: string }).code ?? String(error)}`);
          }
          count++;
        }
      }),
    );
  } finally {
    await pool.destroy();
  }
  return { answers, count, bytes, seconds: (performance.now() - started) / 1000 };
}

if (process.argv.includes("--flood-child")) {
  process.on("message", (job: FloodJob) => void flood(job).then((result) => process.send!(result)));
  process.on("disconnect", () => process.exit(0));
}

function floodProcess(): { run(job: FloodJob): Promise<FloodResult>; stop(): void } {
  const child: ChildProcess = fork(join(__dirname, "strangers-flood.js"), ["--flood-child"], {
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  pin(child.pid!, LOAD_CPU);
  try {
    setPriority(child.pid!, 10);
  } catch {
    /* not allowed here: it then competes at the same priority */
  }
  return {
    run: (job) =>
      new Promise((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`the flood process exited (${code})`));
        child.once("exit", onExit);
        child.once("message", (result: FloodResult) => {
          child.off("exit", onExit);
          resolve(result);
        });
        child.send(job);
      }),
    stop: () => void child.kill(),
  };
}

export async function floodScenario(o: FloodOptions): Promise<Section> {
  const redis = await startRedis();
  const server = await startServer("flood", "duet-node.js", { env: strangerEnv(redis.url) });
  const flooder = floodProcess();
  const pool = new Pool(server.url, { connections: 1, keepAliveTimeout: 60_000 });
  try {
    const [mine] = await openRooms(pool, 1);
    const bystander = rotating(10);
    const recv = () =>
      call(pool, "GET", `/v1/recv?code=${mine!.code}&wait=0`, {
        address: bystander(),
        token: mine!.token,
        timeoutMs: 10_000,
      });
    await loopUntil(performance.now() + 500, 10, recv); // warm up
    const calm = await loopUntil(performance.now() + o.calmSeconds * 1000, 10, recv);
    const [flooded, result] = await Promise.all([
      loopUntil(performance.now() + o.floodSeconds * 1000, 10, recv),
      flooder.run({ url: server.url, address: freshAddress(), seconds: o.floodSeconds }),
    ]);
    const calmP50 = summarize(calm.allMs).p50;
    const floodP50 = summarize(flooded.allMs).p50;
    const ok = flooded.allMs.length > 0 && floodP50 <= calmP50 + P50_MARGIN_MS && flooded.failed === 0;
    if (!o.smoke)
      process.stderr.write(
        `flood: recv p50 ${ms(calmP50)} ms calm, ${ms(floodP50)} ms flooded; ${tallyText(result.answers)}\n`,
      );
    return {
      name: "flood",
      title: "A flood of GET /v1/openapi.json",
      markdown: [
        `One relay on Redis, the product's limits. Another client (ten addresses in turn) loops \`recv wait=0\` 10 ms apart: ${o.calmSeconds} s calm, then`,
        `${o.floodSeconds} s while one address asks GET ${PATH} on ${CONNECTIONS} keep-alive connections with ${PIPELINING} pipelined on each, back to back`,
        `(a process of its own at a lower priority). Target: the other client's p50 under the flood within ${P50_MARGIN_MS} ms of its p50 calm, no call failed.`,
        "",
        "| phase | another client's recv wait=0 | its answers | the flood's answers | flood answers/s | flood MB/s |",
        "|---|---|---|---|---|---|",
        `| calm | ${latencyText(calm.allMs)} | ${tallyText(calm.answers)} | – | – | – |`,
        `| flooded | ${latencyText(flooded.allMs)} | ${tallyText(flooded.answers)} | ${tallyText(result.answers)} | ${Math.round(result.count / result.seconds)} | ${(result.bytes / 1e6 / result.seconds).toFixed(1)} |`,
        "",
        `Flooded p50 within ${P50_MARGIN_MS} ms of calm: ${yesNo(ok)}.`,
      ].join("\n"),
      targets: [{ name: `flood: the other client's recv p50 flooded within ${P50_MARGIN_MS} ms of calm`, ok }],
    };
  } finally {
    flooder.stop();
    await pool.destroy();
    await server.stop();
    await redis.stop();
  }
}
