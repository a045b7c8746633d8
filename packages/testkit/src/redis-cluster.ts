// A real Redis Cluster for tests: masters (and optionally replicas) each verified as the
// process started, joined with redis-cli --cluster create. One launcher, two places
// (redis-place.ts): on loopback (spawnCluster: nodes known by port) or on a test network's
// hosts (spawnNetCluster: nodes known by host, for real partitions). Helpers read the
// topology and wait for it to heal; tests force failovers (CLUSTER FAILOVER on a replica,
// SIGKILL of a master).
import { ask } from "./ask.js";
import type { TestNetwork } from "./netns.js";
import { loopback, onNetwork, type Place, type PlacedRedis, REPLICATION_ARGS, sleep, stopAll } from "./redis-place.js";
import { redisInfo, type SpawnedRedis } from "./redis-server.js";

export interface ClusterOptions {
  /** Replicas per master (redis-cli --cluster-replicas). */
  replicas?: number;
  /** cluster-node-timeout: how long a silent master stays in charge before its replica takes over. */
  nodeTimeoutMs?: number;
}

export interface ClusterNodeView {
  port: number;
  role: "master" | "replica";
  /** A master's own id, or a replica's master's id. */
  id: string;
  masterId?: string;
  failing: boolean;
  /** Slot ranges it serves, inclusive. */
  slots: [number, number][];
}

/** A line of CLUSTER NODES, with the node we started that it names (K: how nodes are known). */
interface Entry<K> extends ClusterNodeView {
  address: string;
  node?: PlacedRedis<K>;
}

interface Cluster<K> {
  nodes: PlacedRedis<K>[];
  /** address:port,… as REDIS_CLUSTER_NODES wants it. */
  seeds: string;
  /** CLUSTER NODES as one live node sees it (asking none of `excluding`, e.g. a stopped one). */
  view(excluding?: K[]): Promise<Entry<K>[]>;
  /** Waits until every live node reports cluster_state:ok and each master serving slots has `replicas` replicas with their link up. */
  waitHealthy(replicas: number, timeoutMs?: number): Promise<void>;
  /** Restarts a killed node on its port with its nodes.conf (it rejoins, as a replica if it was replaced). */
  restart(key: K): Promise<PlacedRedis<K>>;
  stop(): Promise<void>;
}

/** A cluster of hosts.length / (1 + replicas) masters, `replicas` replicas each. */
async function launchCluster<K>(
  place: Place<K>,
  hosts: string[],
  options: { replicas: number; nodeTimeoutMs: number; nodeArgs: string[]; settleMs: number },
): Promise<Cluster<K>> {
  const { replicas } = options;
  const masters = hosts.length / (1 + replicas);
  const nodeArgs = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    String(options.nodeTimeoutMs),
    ...REPLICATION_ARGS,
    ...options.nodeArgs,
  ];
  const nodes: PlacedRedis<K>[] = [];
  const live = () => nodes.filter((node) => node.process.exitCode === null && node.process.signalCode === null);
  const stop = () => stopAll(nodes);

  const view = async (excluding: K[] = []): Promise<Entry<K>[]> => {
    for (const asked of live().filter((n) => !excluding.includes(n.key))) {
      const text = await ask(asked.at, (c) => c.cluster("NODES") as Promise<string>);
      if (!text) continue;
      return text
        .trim()
        .split("\n")
        .map((line) => {
          const [id, address, flags, masterId, , , , , ...slots] = line.split(" ");
          const [, ip, port] = /^(.*):(\d+)@/.exec(address!) ?? [];
          const isMaster = flags!.includes("master");
          return {
            address: ip ?? address!,
            port: Number(port),
            node: nodes.find((n) => n.address === ip && n.port === Number(port)),
            role: isMaster ? "master" : "replica",
            id: isMaster ? id! : masterId!,
            masterId: isMaster ? undefined : masterId,
            failing: /fail|noaddr|handshake/.test(flags!),
            slots: slots
              .filter((slot) => /^\d+(-\d+)?$/.test(slot))
              .map((slot) => {
                const [from, to] = slot.split("-").map(Number);
                return [from!, to ?? from!] as [number, number];
              }),
          } satisfies Entry<K>;
        });
    }
    throw new Error("no cluster node answers");
  };

  const waitHealthy = async (wantReplicas: number, timeoutMs = options.settleMs) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const states = await Promise.all(live().map((node) => ask(node.at, (c) => c.cluster("INFO") as Promise<string>)));
      if (states.every((state) => state !== undefined && /cluster_state:ok/.test(state))) {
        const now = await view().catch(() => []);
        const serving = now.filter((n) => n.role === "master" && n.slots.length > 0 && !n.failing);
        const healthy = serving.every(
          (m) => now.filter((r) => r.role === "replica" && r.masterId === m.id && !r.failing).length >= wantReplicas,
        );
        // Replicas must also have their link to the master up (a WAIT 1 counts only those).
        const links = await Promise.all(
          now
            .filter((n) => n.role === "replica" && !n.failing && n.node)
            .map(async (n) => (await redisInfo(n.node!.at, "replication"))?.master_link_status === "up"),
        );
        if (serving.length === masters && healthy && links.every(Boolean)) return;
      }
      if (Date.now() > deadline) throw new Error("the cluster never became healthy");
    }
  };

  try {
    for (const host of hosts) nodes.push(await place.data(host, nodeArgs));
    const addresses = nodes.map((n) => `${n.address}:${n.port}`);
    const create = ["--cluster", "create", ...addresses, "--cluster-replicas", String(replicas), "--cluster-yes"];
    await place.cli(hosts[0]!, create, options.settleMs);
    await waitHealthy(replicas);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    seeds: nodes.map((n) => `${n.address}:${n.port}`).join(","),
    view,
    waitHealthy,
    async restart(key) {
      const index = nodes.findIndex((node) => node.key === key);
      if (index < 0) throw new Error(`no node ${key}`);
      nodes[index] = await place.data(hosts[index]!, nodeArgs, nodes[index]);
      return nodes[index]!;
    },
    stop,
  };
}

export interface SpawnedCluster {
  nodes: SpawnedRedis[];
  /** 127.0.0.1:port,… as REDIS_CLUSTER_NODES wants it. */
  seeds: string;
  /** CLUSTER NODES as one live node sees it (asking none of the ports `excluding`, e.g. a stopped one). */
  view(excluding?: number[]): Promise<ClusterNodeView[]>;
  /** Waits until every live node reports cluster_state:ok and each master serving slots has `replicas` healthy replicas. */
  waitHealthy(replicas: number, timeoutMs?: number): Promise<void>;
  /** Restarts a killed node on its port with its nodes.conf (it rejoins, as a replica if it was replaced). */
  restart(port: number): Promise<SpawnedRedis>;
  stop(): Promise<void>;
}

/** A cluster on loopback: `masters` masters (3), `replicas` replicas each (0), node timeout 5 s. */
export function spawnCluster(masters = 3, options: ClusterOptions = {}): Promise<SpawnedCluster> {
  const replicas = options.replicas ?? 0;
  return launchCluster(
    loopback,
    Array.from({ length: masters * (1 + replicas) }, (_, i) => `n${i}`),
    { replicas, nodeTimeoutMs: options.nodeTimeoutMs ?? 5000, nodeArgs: [], settleMs: 30_000 },
  );
}

export interface NetClusterNode extends ClusterNodeView {
  /** Its host on the network (its address, for a node this cluster did not start). */
  host: string;
}

export interface NetCluster {
  nodes: Map<string, PlacedRedis<string>>;
  /** REDIS_CLUSTER_NODES for a relay on the network. */
  seeds: string;
  /** CLUSTER NODES as one node (not on a host in `excluding`) sees it. */
  view(excluding?: string[]): Promise<NetClusterNode[]>;
  /** Waits until every node reports cluster_state:ok and each master serving slots has `replicas` replicas with their link up. */
  waitHealthy(replicas: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** A cluster on a test network, a node on each host: hosts.length / (1 + replicas) masters, `replicas` (1) replicas each. */
export async function spawnNetCluster(
  net: TestNetwork,
  hosts: string[],
  options: { replicas?: number; nodeTimeoutMs?: number; nodeArgs?: string[] } = {},
): Promise<NetCluster> {
  const cluster = await launchCluster(onNetwork(net), hosts, {
    replicas: options.replicas ?? 1,
    nodeTimeoutMs: options.nodeTimeoutMs ?? 1000,
    nodeArgs: ["--repl-ping-replica-period", "1", ...(options.nodeArgs ?? [])],
    settleMs: 60_000,
  });
  return {
    ...cluster,
    nodes: new Map(cluster.nodes.map((node) => [node.key, node])),
    view: async (excluding) =>
      (await cluster.view(excluding)).map((entry) => ({ ...entry, host: entry.node?.key ?? entry.address })),
  };
}
