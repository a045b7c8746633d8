// The processes of a run: our own redis-server (never the shared one, verified on its port), the
// duet nodes and the ceiling servers as child processes with an IPC channel, and CPU
// pinning so the measured server and the load generator do not fight for one core.
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { spawnRedis } from "@duet/testkit";
import { Redis } from "ioredis";
import type { MetricsRequest, NodeMetrics } from "./node-metrics.js";

/** CPU of the measured servers; the load generator and Redis take the other one. */
export const SERVER_CPU = "0";
export const LOAD_CPU = "1";

let pinning = true;
/** Pins a process to a CPU; quietly does nothing where taskset is missing. */
export function pin(pid: number, cpu: string): void {
  if (!pinning) return;
  try {
    execFileSync("taskset", ["-a", "-p", "-c", cpu, String(pid)], { stdio: "ignore" });
  } catch {
    pinning = false;
  }
}
export const pinningWorks = () => pinning;

export interface RedisProcess {
  url: string;
  client: Redis;
  stop(): Promise<void>;
}

/** A redis-server of the run's own (never the shared one), pinned beside the load generator. */
export async function startRedis(): Promise<RedisProcess> {
  const redis = await spawnRedis(["--maxclients", "50000"]);
  pin(redis.process.pid!, LOAD_CPU);
  const client = new Redis(redis.url, { connectionName: "bench", maxRetriesPerRequest: 0 });
  return {
    url: redis.url,
    client,
    stop: async () => {
      client.disconnect();
      await redis.stop();
    },
  };
}

export interface ServerProcess {
  name: string;
  url: string;
  /** The node's metrics listener (duet nodes with a METRICS_PORT), as it reported it. */
  metricsUrl?: string;
  pid: number;
  metrics(options?: { gc?: boolean; resetEld?: boolean }): Promise<NodeMetrics>;
  /** Writes a V8 heap snapshot of the process to path (after a full GC); resolves when it is written. */
  heapSnapshot(path: string): Promise<void>;
  stop(): Promise<void>;
}

let nextMetricsId = 1;

/** Starts dist/<script> as a child process and waits for its {type:"ready", url}. */
export async function startServer(
  name: string,
  script: "duet-node.js" | "ceiling-node.js" | "hold-node.js",
  options: {
    args?: string[];
    env?: Record<string, string>;
    execArgv?: string[];
    cpu?: string;
    execPath?: string;
    /** The process's open-file limit (soft and hard), set by prlimit before Node starts. */
    nofile?: number;
  } = {},
): Promise<ServerProcess> {
  const execArgv = ["--expose-gc", ...(options.execArgv ?? [])];
  // prlimit sets the limit and execs Node in its place: the same PID, the IPC channel inherited.
  const limited = options.nofile === undefined ? undefined : [`--nofile=${options.nofile}:${options.nofile}`];
  const child: ChildProcess = fork(join(__dirname, script), options.args ?? [], {
    env: { ...process.env, ...options.env },
    // Another Node than the bench's own (ab --runtime): the same build on two runtimes.
    execPath: limited ? "prlimit" : options.execPath,
    execArgv: limited ? [...limited, options.execPath ?? process.execPath, ...execArgv] : execArgv,
    // Logs go nowhere: a pino line per request is still produced (that cost is duet's),
    // only not kept.
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  pin(child.pid!, options.cpu ?? SERVER_CPU);
  const { url, metricsUrl } = await new Promise<{ url: string; metricsUrl?: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start`)), 15_000);
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code} before it was ready`)));
    child.on("message", (message: { type?: string; url?: string; metricsUrl?: string }) => {
      if (message?.type === "ready") {
        clearTimeout(timer);
        resolve({ url: message.url!, metricsUrl: message.metricsUrl });
      }
    });
  });
  return {
    name,
    url,
    metricsUrl,
    pid: child.pid!,
    metrics: (request = {}) =>
      new Promise<NodeMetrics>((resolve, reject) => {
        const id = nextMetricsId++;
        const timer = setTimeout(() => reject(new Error(`${name} did not report metrics`)), 20_000);
        const onMessage = (message: { type?: string; id?: number; metrics?: NodeMetrics }) => {
          if (message?.type !== "metrics" || message.id !== id) return;
          clearTimeout(timer);
          child.off("message", onMessage);
          resolve(message.metrics!);
        };
        child.on("message", onMessage);
        child.send({ type: "metrics", id, ...request } satisfies MetricsRequest);
      }),
    heapSnapshot: (path) =>
      new Promise<void>((resolve, reject) => {
        const id = nextMetricsId++;
        const timer = setTimeout(() => reject(new Error(`${name} did not write its heap snapshot`)), 600_000);
        const onMessage = (message: { type?: string; id?: number }) => {
          if (message?.type !== "heapsnapshot" || message.id !== id) return;
          clearTimeout(timer);
          child.off("message", onMessage);
          resolve();
        };
        child.on("message", onMessage);
        child.send({ type: "heapsnapshot", id, path });
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        child.send({ type: "stop" });
      }),
  };
}

/** Environment of a duet node for the bench: rate limits off, its own key prefix. */
export function duetEnv(redisUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: "0",
    // Several nodes on one machine: each its own free metrics port.
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: "duet:",
    RATE_LIMIT_REQUESTS: "0",
    RATE_LIMIT_ROOMS: "0",
    ROOMS_PER_IP: "0",
    // The load generator is one address standing for every agent it simulates.
    MAX_WAITERS_PER_CLIENT: "off",
    MAX_CONNECTIONS_PER_IP: "0",
    SHUTDOWN_DRAIN_SECONDS: "1",
    LOG_LEVEL: "info",
    ...extra,
  };
}
