// A real Prometheus (Debian's prometheus package) for a test: its own configuration, data
// directory and loopback port, stopped and removed by stop(). Queries go through its HTTP API.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Sample {
  metric: Record<string, string>;
  value: number;
}

export interface RunningPrometheus {
  url: string;
  /** An instant query at `time` (seconds; default now): every series with its value. */
  query(expr: string, time?: number): Promise<Sample[]>;
  /** A range selector's raw samples at `time`: every series with its [unix seconds, value] pairs. */
  samples(selector: string, time: number): Promise<{ metric: Record<string, string>; values: [number, number][] }[]>;
  stop(): Promise<void>;
  log(): string;
}

/** Below Linux's ephemeral range, so no outgoing connection holds it; the bind decides. */
const candidatePort = () => 20_000 + Math.floor(Math.random() * 12_000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `prometheus` with `config` (YAML text). Retries on another port when the chosen one
 * is taken; ready when /-/ready answers and the flags it reports are this run's.
 */
export async function startPrometheus(config: string): Promise<RunningPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), "duet-prometheus-"));
  const configFile = join(dir, "prometheus.yml");
  writeFileSync(configFile, config);
  for (let attempt = 1; ; attempt++) {
    const port = candidatePort();
    const url = `http://127.0.0.1:${port}`;
    let output = "";
    let child: ChildProcess;
    try {
      child = spawn(
        "prometheus",
        [
          `--config.file=${configFile}`,
          `--storage.tsdb.path=${join(dir, "data")}`,
          `--web.listen-address=127.0.0.1:${port}`,
          "--log.level=warn",
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    const spawned = new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (error) =>
        reject(new Error(`prometheus did not start (${error.message}): install Debian's prometheus package`)),
      );
    });
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    const stop = async () => {
      if (!exited()) {
        const gone = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await gone;
        clearTimeout(timer);
      }
    };
    try {
      await spawned;
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    const ours = async () => {
      try {
        const ready = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) });
        if (ready.status !== 200) return false;
        const flags = (await (await fetch(`${url}/api/v1/status/flags`)).json()) as { data: Record<string, string> };
        return flags.data["config.file"] === configFile;
      } catch {
        return false;
      }
    };
    const deadline = Date.now() + 20_000;
    while (!exited() && Date.now() < deadline && !(await ours())) await sleep(100);
    if (!exited() && (await ours())) {
      return {
        url,
        log: () => output,
        async query(expr, time) {
          const params = new URLSearchParams({ query: expr });
          if (time !== undefined) params.set("time", String(time));
          const response = await fetch(`${url}/api/v1/query?${params}`);
          const body = (await response.json()) as {
            status: string;
            error?: string;
            data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
          };
          if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
          if (body.data!.resultType !== "vector") throw new Error(`${expr}: a ${body.data!.resultType}, not a vector`);
          return body.data!.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
        },
        async samples(selector, time) {
          const params = new URLSearchParams({ query: selector, time: String(time) });
          const body = (await (await fetch(`${url}/api/v1/query?${params}`)).json()) as {
            status: string;
            error?: string;
            data?: { resultType: string; result: { metric: Record<string, string>; values: [number, string][] }[] };
          };
          if (body.status !== "success" || body.data!.resultType !== "matrix")
            throw new Error(`${selector}: ${body.error ?? body.data!.resultType}`);
          return body.data!.result.map((r) => ({
            metric: r.metric,
            values: r.values.map(([t, v]) => [t, Number(v)] as [number, number]),
          }));
        },
        async stop() {
          await stop();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    await stop();
    if (attempt >= 5 || !/address already in use/.test(output)) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`prometheus did not become ready on ${url}:\n${output}`);
    }
  }
}
