// The relays the behaviour suite runs against. Every target is real HTTP on a loopback
// port: the in-process store, one node on Redis, three nodes sharing one Redis, a cluster,
// one node on a Sentinel-managed Redis with write-ack (every change confirmed by every
// replica), and the built server started as a separate process (black box).
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { loadConfig, type Config } from "../../src/config";
import { createLogger } from "../../src/logger";
import { startRelay, type RunningRelay } from "../../src/relay";
import { TestClient } from "./http-client";
import { FIXTURE_OF, type TargetKind, VARIABLE_OF, selectedTargets } from "./selection";
import { spawnRelay } from "@duet/testkit";

export type { TargetKind } from "./selection";

/**
 * Targets the whole behaviour suite runs on: every one, or those DUET_TARGETS names
 * (`DUET_TARGETS=memory pnpm exec jest test/behaviour/rooms.test.ts`). A test that names its
 * kinds (`forEachTarget(body, { kinds: ["redis"] })`) runs on those whatever DUET_TARGETS says.
 */
export const BEHAVIOUR_TARGETS: TargetKind[] = selectedTargets();

/**
 * Targets for the tests that wait out real seconds (room lifetimes, how long an ending is
 * kept, a rate-limit window): the in-process store, one Redis, and three nodes on the
 * Cluster. Each store implementation (memory, Lua) and each Redis topology (one server, a
 * cluster, several nodes) still runs them, without the same seconds waited seven times;
 * what the other targets add (Sentinel's write-ack, the process) does not touch the clock.
 * Within DUET_TARGETS; when it names none of these, on the targets it names.
 */
const TIMED: TargetKind[] = ["memory", "redis", "cluster-3-nodes"];
export const TIMED_TARGETS: TargetKind[] = BEHAVIOUR_TARGETS.some((kind) => TIMED.includes(kind))
  ? BEHAVIOUR_TARGETS.filter((kind) => TIMED.includes(kind))
  : BEHAVIOUR_TARGETS;

/**
 * Targets for what the HTTP layer refuses before any store is touched (a body's parsing, size
 * and shape): the in-process store and the built relay as its own process, where the HTTP
 * layer can differ (source against dist, the process's own Node). Within DUET_TARGETS like
 * TIMED_TARGETS.
 */
const PARSER: TargetKind[] = ["memory", "process"];
export const PARSER_TARGETS: TargetKind[] = BEHAVIOUR_TARGETS.some((kind) => PARSER.includes(kind))
  ? BEHAVIOUR_TARGETS.filter((kind) => PARSER.includes(kind))
  : BEHAVIOUR_TARGETS;

/**
 * Targets for what a node decides by itself: the waiters it holds and bounds, which routes it
 * counts against a budget. The in-process store and the Redis targets but the Cluster's: a
 * Cluster changes where keys live and how pub/sub reaches a node, which the long-poll, stream,
 * rate-limit and wake-up tests run on it; these decisions do not touch it. Within
 * DUET_TARGETS like TIMED_TARGETS (in CI: the in-process store and three nodes on one Redis).
 */
const NODE_LOCAL: TargetKind[] = ["memory", "redis", "redis-3-nodes", "sentinel", "process"];
export const NODE_LOCAL_TARGETS: TargetKind[] = BEHAVIOUR_TARGETS.some((kind) => NODE_LOCAL.includes(kind))
  ? BEHAVIOUR_TARGETS.filter((kind) => NODE_LOCAL.includes(kind))
  : BEHAVIOUR_TARGETS;

/**
 * The store's tally (the duet_store_* gauges, /v1/stats) cached as in production, for files
 * that poll a node's own gauges (waiting calls) on its /metrics and read no tally. Uncached
 * (STATS_CACHE_MS=0, the tests' default), every scrape of a Redis target reads all 1,024
 * tags' tallies: 2,048 Redis commands and about 40 ms of the relay's CPU, so a poll every
 * 20 ms kept a core busy while the test waited for its event.
 */
export const TALLY_CACHED_ENV: Record<string, string> = { STATS_CACHE_MS: "60000" };

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
  METRICS_PORT: "0",
  // Tests read a count right after the change they count; the cache has its own test.
  METRICS_CACHE_MS: "0",
  RATE_LIMIT_REQUESTS: "0",
  RATE_LIMIT_ROOMS: "0",
  ROOMS_PER_IP: "0",
  // Every test client is one address standing for many agents, as for the limits above
  // (test/behaviour/waiter-bounds.test.ts turns it back on).
  MAX_WAITERS_PER_CLIENT: "off",
  // Tests read the tally right after the change they count.
  STATS_CACHE_MS: "0",
  // The behaviour suite asserts answers, not the store deadline (the integration and
  // reliability tests set their own): on a loaded CI machine a Redis reply slower than the
  // default 1.5 s turned opens and sends into 503s the tests did not expect.
  REDIS_COMMAND_TIMEOUT_MS: "10000",
  // Likewise the rate limits' shared count: the suite waits for Redis's answer, so a budget's
  // verdict is the bound while Redis answers. Past the default 500 ms a node counts alone,
  // its fallback, which test/unit/leased-rate-limit.test.ts holds.
  RATE_LIMIT_REDIS_TIMEOUT_MS: "10000",
  LOG_LEVEL: "info",
};

/** A key prefix no other test uses, so tests share one Redis without seeing each other. */
export const uniquePrefix = () => `t${process.pid}-${randomBytes(4).toString("hex")}:`;

export async function startTarget(kind: TargetKind, env: Record<string, string> = {}): Promise<RelayTarget> {
  const fixture = FIXTURE_OF[kind];
  if (fixture && !process.env[VARIABLE_OF[fixture]] && !env[VARIABLE_OF[fixture]])
    throw new Error(
      `the ${kind} target needs ${VARIABLE_OF[fixture]}, which the global setup sets only for files that name the target ` +
        `(forEachTarget, "${kind}" as a string, or process.env.${VARIABLE_OF[fixture]}): see test/support/selection.ts`,
    );
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
    client: new TestClient(
      nodes.map((node) => node.url),
      nodes.map((node) => node.metricsUrl ?? ""),
    ),
    config,
    nodes,
    logs: () => lines.join(""),
    close: async () => void (await Promise.all(nodes.map((node) => node.shutdown()))),
  };
}

/**
 * Waits for /readyz to answer 200: the relay is up and its store answers. The bound only
 * guards a relay that never gets there (loading the relay takes a second on an idle machine
 * and far longer on a busy one); it measures nothing.
 */
export async function waitUntilReady(url: string, guardMs = 90_000): Promise<void> {
  for (const deadline = Date.now() + guardMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 25))) {
    const response = await fetch(`${url}/readyz`).catch(() => undefined);
    if (response?.status === 200) return;
  }
  throw new Error(`relay at ${url} never became ready within ${guardMs} ms`);
}

const MAIN_JS = join(__dirname, "../../dist/main.js");

/** The built server as its own process: what `pnpm start` runs. */
async function startProcessTarget(env: Record<string, string>): Promise<RelayTarget> {
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run 'pnpm build' first`);
  const relay = await spawnRelay({ main: MAIN_JS, env: { PATH: process.env.PATH!, ...env } });
  await waitUntilReady(relay.url);
  return {
    kind: "process",
    process: relay.child,
    client: new TestClient([relay.url], [relay.metricsUrl ?? ""]),
    config: loadConfig(env),
    nodes: [],
    logs: relay.logs,
    // No SIGKILL: a relay that does not drain and exit on SIGTERM fails the test by its timeout.
    close: () => relay.stop(Number.POSITIVE_INFINITY),
  };
}

/** How long starting (or closing) a target may take before its tests fail. */
const TARGET_START_MS = 90_000;

/** Runs body once per target kind, with a fresh relay per kind shared by its tests. */
export function forEachTarget(
  body: (target: () => RelayTarget) => void,
  options: { kinds?: TargetKind[]; env?: Record<string, string> } = {},
) {
  describe.each(options.kinds ?? BEHAVIOUR_TARGETS)("on %s", (kind) => {
    // Starting a target is not what is tested: its bound guards a relay that never starts
    // (the process's own guard is testkit's spawnRelay), it measures nothing.
    body(useTarget(kind, options.env, TARGET_START_MS));
  });
}

/** forEachTarget on the targets whose clock the tests can rely on (TIMED_TARGETS), with `env`. */
export const forEachTimedTarget = (env: Record<string, string>, body: (target: () => RelayTarget) => void) =>
  forEachTarget(body, { env, kinds: TIMED_TARGETS });

/** The first lines of most behaviour tests: the target's client, and a room both seats joined. */
export async function pairedRoomOn(target: () => RelayTarget) {
  const { client } = target();
  return { client, room: await client.pairedRoom() };
}

/**
 * A target of the calling describe's own: started before its tests, closed after them.
 * `timeoutMs` bounds each hook (jest's default when not given).
 */
export function useTarget(kind: TargetKind, env?: Record<string, string>, timeoutMs?: number): () => RelayTarget {
  let target: RelayTarget | undefined;
  beforeAll(async () => {
    target = await startTarget(kind, env);
  }, timeoutMs);
  afterAll(async () => {
    await target?.close();
  }, timeoutMs);
  return () => target!;
}
