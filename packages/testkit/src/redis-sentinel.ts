// A real Sentinel topology for tests: a master, its replicas and its sentinels, all
// redis-server processes (Sentinel mode is `redis-server <conf> --sentinel`), each verified
// as the process started. One launcher, two places (redis-place.ts): on loopback
// (spawnSentinelTopology: three sentinels by default, nodes known by port) or on a test
// network's hosts (spawnNetSentinel: nodes known by host, for real partitions). Each
// sentinel gets its own writable config file (Sentinel rewrites it) in its own temp dir,
// removed at stop. Helpers find the current master and force failovers.
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ask } from "./ask.js";
import type { TestNetwork } from "./netns.js";
import { loopback, onNetwork, type Place, type PlacedRedis, REPLICATION_ARGS, sleep, stopAll } from "./redis-place.js";
import { redisInfo, type SpawnedRedis } from "./redis-server.js";

export interface SentinelOptions {
  replicas?: number;
  sentinels?: number;
  /** The name the sentinels monitor the master under. */
  name?: string;
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  /** More redis-server arguments for every data node (e.g. `--appendonly yes`). */
  nodeArgs?: string[];
  /** A file every node and sentinel appends its log to (each line names its pid and role). */
  logFile?: string;
}

export interface RestartOptions {
  /**
   * "replica" (default): as a replica of the master the sentinels agree on, as Sentinel
   * would reconfigure it. "master": with no replicaof, the role a master that was killed
   * had (a supervisor restarting it with its own config before Sentinel fails it over).
   */
  as?: "replica" | "master";
  /** Start from an empty data directory (a node that keeps nothing on disk) instead of its own. */
  empty?: boolean;
}

/** The topology on either place; K is how a node is known (port or host). */
interface Sentinels<K> {
  name: string;
  /** address:port,… as REDIS_SENTINELS wants it. */
  sentinels: string;
  sentinelNodes: Map<K, PlacedRedis<K>>;
  /** Every data node ever started (a restarted node replaces its entry). */
  nodes: Map<K, PlacedRedis<K>>;
  /** The master, as a majority of the sentinels report it (undefined: no agreement). */
  master(): Promise<K | undefined>;
  /** Waits until the sentinels agree on a master other than `old`, and it answers as master. */
  waitForNewMaster(old: K, timeoutMs?: number): Promise<K>;
  /** Waits until the master has `count` replicas online with their link up, and the sentinels know them. */
  waitForReplicas(count: number, timeoutMs?: number): Promise<void>;
  /** INFO replication of a data node ({} when it does not answer). */
  replication(node: K): Promise<Record<string, string>>;
  /** SENTINEL FAILOVER: a clean switch (the old master is demoted to replica). */
  sentinelFailover(): Promise<void>;
  restart(node: K, options?: RestartOptions): Promise<PlacedRedis<K>>;
  stop(): Promise<void>;
}

async function launchSentinels<K>(
  place: Place<K>,
  data: string[],
  sentinelHosts: string[],
  options: Omit<SentinelOptions, "replicas" | "sentinels"> & { settleMs: number },
): Promise<Sentinels<K>> {
  const name = options.name ?? "duet";
  const quorum = Math.floor(sentinelHosts.length / 2) + 1;
  const nodeArgs = [
    ...REPLICATION_ARGS,
    "--repl-ping-replica-period",
    "1",
    ...(options.nodeArgs ?? []),
    ...(options.logFile ? ["--logfile", options.logFile] : []),
  ];
  const nodes = new Map<K, PlacedRedis<K>>();
  const hostOf = new Map<K, string>();
  const sentinelNodes = new Map<K, PlacedRedis<K>>();
  const stop = () => stopAll([...nodes.values(), ...sentinelNodes.values()]);
  const startData = async (host: string, args: string[], again?: PlacedRedis<K>) => {
    const node = await place.data(host, [...nodeArgs, ...args], again);
    nodes.set(node.key, node);
    hostOf.set(node.key, host);
    return node;
  };
  const replicaOf = (master: PlacedRedis<K>) => ["--replicaof", master.address, String(master.port)];
  const askSentinels = <T>(question: Parameters<typeof ask<T>>[1]) =>
    Promise.all([...sentinelNodes.values()].map((s) => ask(s.at, question)));
  const replication = async (key: K) => (await redisInfo(nodes.get(key)!.at, "replication")) ?? {};

  const master = async () => {
    const answers = await askSentinels(
      (c) => c.call("SENTINEL", "get-master-addr-by-name", name) as Promise<[string, string] | null>,
    );
    const counts = new Map<K, number>();
    for (const answer of answers) {
      const node = answer && [...nodes.values()].find((n) => n.address === answer[0] && n.port === Number(answer[1]));
      if (node) counts.set(node.key, (counts.get(node.key) ?? 0) + 1);
    }
    for (const [key, count] of counts) if (count >= quorum) return key;
    return undefined;
  };

  const waitForReplicas = async (count: number, timeoutMs = options.settleMs) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const key = await master();
      const info = key === undefined ? {} : await replication(key);
      const online = Object.entries(info).filter(([k, v]) => /^slave\d+$/.test(k) && v.includes("state=online")).length;
      if (info.role === "master" && online >= count) {
        // ...and the sentinels know them (they learn replicas from the master's INFO).
        const known = await askSentinels(
          async (c) =>
            ((await c.call("SENTINEL", "replicas", name)) as string[][]).filter(
              (r) => !r.join(" ").match(/s_down|o_down|disconnected/),
            ).length,
        );
        if (known.filter((k) => (k ?? 0) >= count).length >= quorum) return;
      }
      if (Date.now() > deadline) throw new Error(`the master never had ${count} replicas online`);
    }
  };

  const waitForNewMaster = async (old: K, timeoutMs = 30_000) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(50)) {
      const current = await master();
      if (current !== undefined && current !== old && (await replication(current)).role === "master") return current;
      if (Date.now() > deadline) throw new Error(`no new master after ${timeoutMs} ms (was ${old})`);
    }
  };

  try {
    const [first, ...rest] = data;
    const primary = await startData(first!, []);
    for (const host of rest) await startData(host, replicaOf(primary));
    for (const host of sentinelHosts) {
      const sentinel = await place.sentinel(host, [
        `sentinel monitor ${name} ${primary.address} ${primary.port} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
        `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 5000}`,
        `sentinel parallel-syncs ${name} 1`,
        ...(options.logFile ? [`logfile ${options.logFile}`] : []),
      ]);
      sentinelNodes.set(sentinel.key, sentinel);
      const mode = (await redisInfo(sentinel.at))?.redis_mode;
      if (mode !== "sentinel")
        throw new Error(`${sentinel.address}:${sentinel.port} answers in ${mode} mode, not sentinel`);
    }
    // Ready: a majority agrees on the master, every replica is online, and the sentinels
    // see each other (they need to, to elect a leader for a failover).
    await waitForReplicas(rest.length);
    for (const deadline = Date.now() + options.settleMs; ; await sleep(100)) {
      const peers = await askSentinels(
        async (c) => ((await c.call("SENTINEL", "sentinels", name)) as unknown[]).length,
      );
      if (peers.every((count) => count === sentinelNodes.size - 1)) break;
      if (Date.now() > deadline) throw new Error("the sentinels never discovered each other");
    }
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    name,
    sentinels: [...sentinelNodes.values()].map((s) => `${s.address}:${s.port}`).join(","),
    sentinelNodes,
    nodes,
    master,
    waitForNewMaster,
    waitForReplicas,
    replication,
    async sentinelFailover() {
      const before = await master();
      if (before === undefined) throw new Error("no master to fail over");
      // A sentinel refuses while a previous failover is still settling (INPROG/NOGOODSLAVE): retry.
      for (const deadline = Date.now() + 20_000; ; await sleep(250)) {
        const answer = await ask([...sentinelNodes.values()][0]!.at, (c) =>
          c.call("SENTINEL", "FAILOVER", name).catch((e: Error) => e.message),
        );
        if (answer === "OK") break;
        if (Date.now() > deadline) throw new Error(`SENTINEL FAILOVER kept failing: ${answer}`);
      }
      await waitForNewMaster(before);
    },
    async restart(key, restartOptions = {}) {
      const old = nodes.get(key)!;
      if (restartOptions.empty)
        for (const file of readdirSync(old.dir)) rmSync(join(old.dir, file), { recursive: true, force: true });
      const current = restartOptions.as === "master" ? undefined : await master();
      return startData(
        hostOf.get(key)!,
        current !== undefined && current !== key ? replicaOf(nodes.get(current)!) : [],
        old,
      );
    },
    stop,
  };
}

export interface SpawnedSentinelProcess {
  port: number;
  process: SpawnedRedis["process"];
}

export interface SpawnedSentinelTopology {
  name: string;
  /** 127.0.0.1:port,… as REDIS_SENTINELS wants it. */
  sentinels: string;
  sentinelProcesses: SpawnedSentinelProcess[];
  /** Every data node ever started, by port (a restarted node replaces its entry). */
  nodes: Map<number, SpawnedRedis>;
  /** The master's port, as a majority of the sentinels report it (undefined: no agreement). */
  masterPort(): Promise<number | undefined>;
  /** The current master's process. */
  master(): Promise<SpawnedRedis>;
  /** Waits until the sentinels agree on a master other than `port`, and it answers as master. */
  waitForNewMaster(port: number, timeoutMs?: number): Promise<number>;
  /** Waits until `count` replicas are connected to the master with their link up. */
  waitForReplicas(count: number, timeoutMs?: number): Promise<void>;
  /** SENTINEL FAILOVER: a clean switch (the old master is demoted to replica). */
  sentinelFailover(): Promise<void>;
  /**
   * Restarts a node that was killed, on its port, from its data directory (a replica keeps
   * the RDB of its last full sync there; a node with `--appendonly yes` its AOF), by
   * default as a replica of the current master.
   */
  restart(port: number, options?: RestartOptions): Promise<SpawnedRedis>;
  stop(): Promise<void>;
}

/** The topology on loopback: a master, `replicas` replicas (2) and `sentinels` sentinels (3). */
export async function spawnSentinelTopology(options: SentinelOptions = {}): Promise<SpawnedSentinelTopology> {
  const names = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  const topology = await launchSentinels(
    loopback,
    names("d", 1 + (options.replicas ?? 2)),
    names("s", options.sentinels ?? 3),
    {
      ...options,
      settleMs: 20_000,
    },
  );
  return {
    ...topology,
    sentinelProcesses: [...topology.sentinelNodes.values()],
    masterPort: topology.master,
    async master() {
      const port = await topology.master();
      if (port === undefined) throw new Error("the sentinels agree on no master we started");
      return topology.nodes.get(port)!;
    },
  };
}

export interface NetSentinelOptions {
  /** Hosts of the data nodes; the first starts as master. */
  data: string[];
  /** Hosts of the sentinels (a majority is the quorum). */
  sentinels: string[];
  name?: string;
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  /** Extra redis-server arguments for every data node (e.g. min-replicas-to-write). */
  nodeArgs?: string[];
}

export interface NetSentinelTopology extends Omit<Sentinels<string>, "master" | "restart"> {
  /** The master's host, as a majority of the sentinels that answer report it. */
  masterHost(): Promise<string | undefined>;
}

/** The topology on a test network: a data node or sentinel on each host named. */
export async function spawnNetSentinel(net: TestNetwork, options: NetSentinelOptions): Promise<NetSentinelTopology> {
  const { data, sentinels, ...rest } = options;
  const topology = await launchSentinels(onNetwork(net), data, sentinels, { ...rest, settleMs: 30_000 });
  return { ...topology, masterHost: topology.master };
}
