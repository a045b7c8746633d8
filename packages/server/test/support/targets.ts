// The relays the behaviour suite runs against. Every target is real HTTP on a loopback
// port: the in-process store, one node on Redis, three nodes sharing one Redis, a cluster,
// one node on a Sentinel-managed Redis with write-ack (every change confirmed by every
// replica), and the built server started as a separate process (black box).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { loadConfig, type Config } from "../../src/config";
import { createLogger } from "../../src/logger";
import { startRelay, type RunningRelay } from "../../src/relay";
import { TestClient } from "./http-client";
import { killOnExit } from "@duet/testkit";

export type TargetKind = "memory" | "redis" | "redis-3-nodes" | "cluster" | "cluster-3-nodes" | "sentinel" | "process";

/** Targets the whole behaviour suite runs on. */
export const BEHAVIOUR_TARGETS: TargetKind[] = [
  "memory",
  "redis",
  "redis-3-nodes",
  "cluster",
  "cluster-3-nodes",
  "sentinel",
  "process",
];

export interface RelayTarget {
  kind: TargetKind;
  client: TestClient;
  config: Config;
  nodes: RunningRelay[];
  /** Every log line every node wrote, as text. */
  logs(): string;
  /** The process target only: its child process. */
  process?: import("node:child_process").ChildProcess;
  close(): Promise<void>;
}

const TEST_DEFAULTS: Record<string, string> = {
  HOST: "127.0.0.1",
  PORT: "0",
  RATE_LIMIT_REQUESTS: "0",
  RATE_LIMIT_ROOMS: "0",
  // Tests read the tally right after the change they count.
  STATS_CACHE_MS: "0",
  LOG_LEVEL: "info",
};

/** A key prefix no other test uses, so tests share one Redis without seeing each other. */
export const uniquePrefix = () => `t${process.pid}-${randomBytes(4).toString("hex")}:`;

export async function startTarget(kind: TargetKind, env: Record<string, string> = {}): Promise<RelayTarget> {
  const onCluster = kind.startsWith("cluster");
  const onSentinel = kind === "sentinel";
  const fullEnv = {
    ...TEST_DEFAULTS,
    ...(kind === "memory" ? {} : { REDIS_KEY_PREFIX: uniquePrefix() }),
    ...(kind === "memory" || onCluster || onSentinel ? {} : { REDIS_URL: process.env.REDIS_URL! }),
    ...(onCluster ? { REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES! } : {}),
    ...(onSentinel
      ? {
          REDIS_SENTINELS: process.env.REDIS_SENTINELS!,
          REDIS_SENTINEL_NAME: process.env.REDIS_SENTINEL_NAME!,
          // Write-ack on every replica the master has (two here): what the Sentinel overlay ships.
          REDIS_WRITE_ACK_REPLICAS: "all",
          REDIS_WRITE_ACK_TIMEOUT_MS: "1000",
        }
      : {}),
    ...env,
  };
  if (kind === "process") return startProcessTarget(fullEnv);
  const config = loadConfig(fullEnv);
  const lines: string[] = [];
  const sink = new Writable({
    write: (chunk, _enc, done) => {
      lines.push(chunk.toString());
      done();
    },
  });
  const nodeCount = kind.endsWith("3-nodes") ? 3 : 1;
  const nodes: RunningRelay[] = [];
  for (let i = 0; i < nodeCount; i++) nodes.push(await startRelay(config, createLogger(config.logLevel, sink)));
  await Promise.all(nodes.map((node) => waitUntilReady(node.url)));
  return {
    kind,
    client: new TestClient(nodes.map((node) => node.url)),
    config,
    nodes,
    logs: () => lines.join(""),
    close: async () => void (await Promise.all(nodes.map((node) => node.shutdown()))),
  };
}

export async function waitUntilReady(url: string): Promise<void> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 25))) {
    const response = await fetch(`${url}/readyz`).catch(() => undefined);
    if (response?.status === 200) return;
  }
  throw new Error(`relay at ${url} never became ready`);
}

const MAIN_JS = join(__dirname, "../../dist/main.js");

/** The built server as its own process: what `pnpm start` runs. */
async function startProcessTarget(env: Record<string, string>): Promise<RelayTarget> {
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run 'pnpm build' first`);
  const child = spawn(process.execPath, [MAIN_JS], {
    env: { PATH: process.env.PATH!, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  killOnExit(child);
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 15_000);
    const check = () => {
      const match = /"url":"([^"]+)"[^\n]*"msg":"listening"/.exec(output);
      if (match) {
        clearTimeout(timer);
        child.stdout.off("data", check);
        resolve(match[1]!);
      }
    };
    child.stdout.on("data", check);
    child.once("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
  await waitUntilReady(url);
  return {
    kind: "process",
    process: child,
    client: new TestClient([url]),
    config: loadConfig(env),
    nodes: [],
    logs: () => output,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Runs body once per target kind, with a fresh relay per kind shared by its tests. */
export function forEachTarget(
  body: (target: () => RelayTarget) => void,
  options: { kinds?: TargetKind[]; env?: Record<string, string> } = {},
) {
  describe.each(options.kinds ?? BEHAVIOUR_TARGETS)("on %s", (kind) => {
    let target: RelayTarget | undefined;
    beforeAll(async () => {
      target = await startTarget(kind, options.env);
    });
    afterAll(async () => {
      await target?.close();
    });
    body(() => target!);
  });
}
