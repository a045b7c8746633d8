// infra/local/topology.mjs as a fixture: Redis, three relays and nginx from local binaries,
// ready when it prints its "topology ready" line, stopped (every process it started) by stop().
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { join, resolve } from "node:path";

export const ROOT = resolve(__dirname, "../../../..");
const TOPOLOGY = join(ROOT, "infra/local/topology.mjs");
const SERVER_MAIN = join(ROOT, "packages/server/dist/main.js");

export interface Topology {
  url: string;
  redis: string;
  /** address: the public port; metricsAddress: the metrics listener (GET /metrics). */
  replicas: { name: string; port: number; address: string; metricsAddress: string; pid: number }[];
  nginx: { pid: number; accessLog: string; errorLog: string };
  dir: string;
  pid: number;
}

const after = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms).unref());

export async function startTopology(
  env: Record<string, string>,
  maxSeconds: number,
): Promise<{ topology: Topology; stop: () => Promise<void> }> {
  if (!existsSync(SERVER_MAIN)) throw new Error(`${SERVER_MAIN} is missing: run \`pnpm -r build\` before this test`);
  const child: ChildProcess = spawn(process.execPath, [TOPOLOGY, "--max-seconds", String(maxSeconds)], {
    cwd: ROOT,
    detached: true, // own process group: the fallback kill reaches every child
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, SHUTDOWN_DRAIN_SECONDS: "1", ...env },
  });
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    if ((await Promise.race([exit, after(20_000, "timeout" as const)])) === "timeout") {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  };
  const topology = await new Promise<Topology>((resolveReady, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`topology not ready in 60 s:\n${stderr}`)), 60_000);
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const line = out.split("\n").find((l) => l.includes('"topology ready"'));
      if (line) {
        clearTimeout(timer);
        resolveReady(JSON.parse(line) as Topology);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`topology exited (${code}) before it was ready:\n${stderr}`));
    });
  }).catch(async (error) => {
    await stop();
    throw error;
  });
  return { topology, stop };
}

/** Whether something accepts a connection on a loopback port (a process still holding it). */
export function portAccepts(port: number): Promise<boolean> {
  return new Promise((r) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      r(true);
    });
    s.once("error", () => r(false));
  });
}
