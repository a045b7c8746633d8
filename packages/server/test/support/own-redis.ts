// A store of a test file's own (not the global setup's shared one), for the tests that
// restart, fill, slow, watch or fail over their store: a redis-server (ownRedis), a
// Sentinel topology (ownSentinel) or a Cluster (ownCluster), and a relay target on it.
// Started before the tests of the calling describe (before each test, with `each`) and
// stopped after.
import { Redis } from "ioredis";
import {
  type ClusterOptions,
  type SentinelOptions,
  spawnCluster,
  type SpawnedCluster,
  type SpawnedRedis,
  type SpawnedSentinelTopology,
  spawnRedis,
  spawnSentinelTopology,
} from "@duet/testkit";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy";
import { startTarget, type RelayTarget, type TargetKind } from "./targets";

export interface OwnRedisOptions {
  /** redis-server arguments beyond the fixture's own. */
  args?: string[];
  /** The target the relays make (default `redis`: one relay in this process). */
  kind?: TargetKind;
  /** The relays' environment beyond REDIS_URL. */
  env?: Record<string, string>;
  /** The relays reach Redis through a loopback TCP proxy (to slow, cut or black-hole the link). */
  proxy?: boolean;
  /** A new server and target for each test, not one for the describe. */
  each?: boolean;
  /** The hooks' timeout (jest's default when not given). */
  timeoutMs?: number;
}

export interface OwnRedis {
  redis: SpawnedRedis;
  target: RelayTarget;
  /** Only with `proxy`. */
  proxy: TcpProxy;
  /** A client on the server itself (made at first use, closed with the rest). */
  readonly admin: Redis;
}

export function ownRedis(options: OwnRedisOptions = {}): OwnRedis {
  let admin: Redis | undefined;
  const own = {
    get admin() {
      admin ??= new Redis(own.redis.url);
      return admin;
    },
  } as OwnRedis;
  const [before, after] = options.each ? [beforeEach, afterEach] : [beforeAll, afterAll];
  before(async () => {
    own.redis = await spawnRedis(options.args);
    if (options.proxy) own.proxy = await startTcpProxy(own.redis.port);
    own.target = await startTarget(options.kind ?? "redis", {
      REDIS_URL: (options.proxy ? own.proxy : own.redis).url,
      ...options.env,
    });
  }, options.timeoutMs);
  after(async () => {
    own.proxy?.resume();
    await own.target?.close();
    admin?.disconnect();
    admin = undefined;
    await own.proxy?.close();
    await own.redis?.stop("SIGKILL");
  }, options.timeoutMs);
  return own;
}

/** A store started by `start` and a target on it (`env` from the store): started before the describe's tests. */
function ownStore<K extends string, S extends { stop(): Promise<void> }>(
  key: K,
  start: () => Promise<S>,
  kind: TargetKind,
  env: (store: S) => Record<string, string>,
): { [k in K]: S } & { target: RelayTarget } {
  const own = {} as { [k in K]: S } & { target: RelayTarget };
  beforeAll(async () => {
    const store = await start();
    (own as Record<K, S>)[key] = store;
    own.target = await startTarget(kind, env(store));
  }, 120_000);
  afterAll(async () => {
    await own.target?.close();
    await (own as Partial<Record<K, S>>)[key]?.stop();
  });
  return own;
}

/**
 * A Sentinel topology (`options`) and a target on it: REDIS_SENTINELS and
 * REDIS_SENTINEL_NAME, no REDIS_URL, plus `env`. Started before the describe's tests.
 */
export const ownSentinel = (options: SentinelOptions, kind: TargetKind, env: Record<string, string> = {}) =>
  ownStore(
    "topology",
    () => spawnSentinelTopology(options),
    kind,
    ({ sentinels, name }: SpawnedSentinelTopology) => ({
      REDIS_URL: "",
      REDIS_SENTINELS: sentinels,
      REDIS_SENTINEL_NAME: name,
      ...env,
    }),
  );

/** A Cluster (`masters`, `options`) and a `cluster` target on it (REDIS_CLUSTER_NODES, plus `env`). */
export const ownCluster = (masters: number, options: ClusterOptions, env: Record<string, string> = {}) =>
  ownStore(
    "cluster",
    () => spawnCluster(masters, options),
    "cluster",
    (cluster: SpawnedCluster) => ({
      REDIS_CLUSTER_NODES: cluster.seeds,
      ...env,
    }),
  );
