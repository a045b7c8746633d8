// A real local Redis Cluster for tests: masters (and optionally one replica each) spawned
// by spawnRedis (each verified on its own port), joined with redis-cli --cluster create.
// Helpers read the topology and force failovers (CLUSTER FAILOVER on a replica, SIGKILL
// of a master).
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { ask } from "./ask.js";
import { spawnRedis, type SpawnedRedis } from "./redis-server.js";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

export interface SpawnedCluster {
  nodes: SpawnedRedis[];
  /** host:port,host:port,... as REDIS_CLUSTER_NODES wants it. */
  seeds: string;
  /** CLUSTER NODES as one live node sees it (asking none of `excluding`, e.g. a stopped one). */
  view(excluding?: number[]): Promise<ClusterNodeView[]>;
  /** Waits until every live node reports cluster_state:ok and each master serving slots has `replicas` healthy replicas. */
  waitHealthy(replicas: number, timeoutMs?: number): Promise<void>;
  /** Restarts a killed node on its port with its nodes.conf (it rejoins, as a replica if it was replaced). */
  restart(port: number): Promise<SpawnedRedis>;
  stop(): Promise<void>;
}

export async function spawnCluster(masters = 3, options: ClusterOptions = {}): Promise<SpawnedCluster> {
  const replicas = options.replicas ?? 0;
  const nodeArgs = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    String(options.nodeTimeoutMs ?? 5000),
    "--enable-debug-command",
    "local",
    "--repl-diskless-sync",
    "yes",
    "--repl-diskless-sync-delay",
    "0",
  ];
  const nodes: SpawnedRedis[] = [];
  const live = () => nodes.filter((node) => node.process.exitCode === null && node.process.signalCode === null);
  const stop = async () => void (await Promise.all(nodes.map((node) => node.stop("SIGKILL"))));

  const view = async (excluding: number[] = []): Promise<ClusterNodeView[]> => {
    for (const node of live().filter((n) => !excluding.includes(n.port))) {
      const text = await ask(node.port, (c) => c.cluster("NODES") as Promise<string>);
      if (!text) continue;
      return text
        .trim()
        .split("\n")
        .map((line) => {
          const [id, address, flags, masterId, , , , , ...slots] = line.split(" ");
          const isMaster = flags!.includes("master");
          return {
            port: Number(/:(\d+)@/.exec(address!)?.[1]),
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
          } satisfies ClusterNodeView;
        });
    }
    throw new Error("no cluster node answers");
  };

  const waitHealthy = async (wantReplicas: number, timeoutMs = 30_000) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const states = await Promise.all(
        live().map((node) => ask(node.port, (c) => c.cluster("INFO") as Promise<string>)),
      );
      const ok = states.every((state) => state !== undefined && /cluster_state:ok/.test(state));
      if (ok) {
        const nodesNow = await view().catch(() => []);
        const servingMasters = nodesNow.filter((n) => n.role === "master" && n.slots.length > 0 && !n.failing);
        const healthy = servingMasters.every(
          (m) =>
            nodesNow.filter((r) => r.role === "replica" && r.masterId === m.id && !r.failing).length >= wantReplicas,
        );
        // Replicas must also have their link to the master up (a WAIT 1 counts only those).
        const links = await Promise.all(
          nodesNow
            .filter((n) => n.role === "replica" && !n.failing)
            .map((n) =>
              ask(n.port, async (c) => /master_link_status:up/.test((await c.info("replication")) as string)),
            ),
        );
        if (servingMasters.length === masters && healthy && links.every(Boolean)) return;
      }
      if (Date.now() > deadline) throw new Error("the cluster never became healthy");
    }
  };

  try {
    for (let i = 0; i < masters * (1 + replicas); i++) nodes.push(await spawnRedis(nodeArgs));
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    await run(
      "redis-cli",
      ["--cluster", "create", ...addresses, "--cluster-replicas", String(replicas), "--cluster-yes"],
      { timeout: 30_000 },
    );
    await waitHealthy(replicas);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    seeds: nodes.map((node) => `127.0.0.1:${node.port}`).join(","),
    view,
    waitHealthy,
    async restart(port: number) {
      const index = nodes.findIndex((node) => node.port === port);
      if (index < 0) throw new Error(`no node on port ${port}`);
      const node = await spawnRedis(nodeArgs, port, { dir: nodes[index]!.dir });
      nodes[index] = node;
      return node;
    },
    stop,
  };
}
