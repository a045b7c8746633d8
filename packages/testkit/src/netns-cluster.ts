// A Redis Cluster on a test network (netns.ts), one redis-server per host namespace
// (netns-redis-server.ts), created with redis-cli --cluster create from inside the network.
import type { TestNetwork } from "./netns.js";
import { askAt, infoAt, type NetRedis, sleep, startOn, stopAll, dataArgs } from "./netns-redis-server.js";
import { which } from "./which.js";

export interface NetClusterNode {
  host: string;
  role: "master" | "replica";
  /** A master's own id, or a replica's master's id. */
  id: string;
  failing: boolean;
  slots: [number, number][];
}

export interface NetCluster {
  nodes: Map<string, NetRedis>;
  /** REDIS_CLUSTER_NODES for a relay on the network. */
  seeds: string;
  /** CLUSTER NODES as one node (not in `excluding`) sees it. */
  view(excluding?: string[]): Promise<NetClusterNode[]>;
  /** Waits until every node reports cluster_state:ok and each master serving slots has `replicas` replicas with their link up. */
  waitHealthy(replicas: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** A Redis Cluster: hosts.length / (1 + replicas) masters, `replicas` replicas each. */
export async function spawnNetCluster(
  net: TestNetwork,
  hosts: string[],
  options: { replicas?: number; nodeTimeoutMs?: number; nodeArgs?: string[] } = {},
): Promise<NetCluster> {
  const replicas = options.replicas ?? 1;
  const masters = hosts.length / (1 + replicas);
  const nodes = new Map<string, NetRedis>();
  const hostOf = (address: string) => [...nodes.values()].find((n) => n.address === address)?.host;
  const stop = () => stopAll(nodes.values());

  const view = async (excluding: string[] = []): Promise<NetClusterNode[]> => {
    for (const node of nodes.values()) {
      if (excluding.includes(node.host)) continue;
      const text = await askAt(node.socket, (c) => c.cluster("NODES") as Promise<string>);
      if (!text) continue;
      return text
        .trim()
        .split("\n")
        .map((line) => {
          const [id, address, flags, masterId, , , , , ...slots] = line.split(" ");
          const isMaster = flags!.includes("master");
          return {
            host: hostOf(address!.split(":")[0]!) ?? address!,
            role: isMaster ? "master" : "replica",
            id: isMaster ? id! : masterId!,
            failing: /fail|noaddr|handshake/.test(flags!),
            slots: slots
              .filter((slot) => /^\d+(-\d+)?$/.test(slot))
              .map((slot) => {
                const [from, to] = slot.split("-").map(Number);
                return [from!, to ?? from!] as [number, number];
              }),
          } satisfies NetClusterNode;
        });
    }
    throw new Error("no cluster node answers");
  };

  const waitHealthy = async (wantReplicas: number, timeoutMs = 30_000) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const states = await Promise.all(
        [...nodes.values()].map((node) => askAt(node.socket, (c) => c.cluster("INFO") as Promise<string>)),
      );
      if (states.every((state) => state !== undefined && /cluster_state:ok/.test(state))) {
        const now = await view().catch(() => []);
        const serving = now.filter((n) => n.role === "master" && n.slots.length > 0 && !n.failing);
        const healthy = serving.every(
          (m) => now.filter((r) => r.role === "replica" && r.id === m.id && !r.failing).length >= wantReplicas,
        );
        const links = await Promise.all(
          now
            .filter((n) => n.role === "replica" && !n.failing && nodes.has(n.host))
            .map(async (n) => (await infoAt(nodes.get(n.host)!.socket)).master_link_status === "up"),
        );
        if (serving.length === masters && healthy && links.every(Boolean)) return;
      }
      if (Date.now() > deadline) throw new Error("the cluster never became healthy");
    }
  };

  try {
    for (const host of hosts) {
      const address = net.host(host).address;
      nodes.set(
        host,
        await startOn(net, host, 6379, (dir, socket) =>
          dataArgs(address, dir, socket, [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            String(options.nodeTimeoutMs ?? 1000),
            ...(options.nodeArgs ?? []),
          ]),
        ),
      );
    }
    const cli = which("redis-cli");
    if (!cli) throw new Error("redis-cli is not on PATH");
    await net.exec(
      hosts[0]!,
      cli,
      [
        "--cluster",
        "create",
        ...[...nodes.values()].map((n) => `${n.address}:6379`),
        "--cluster-replicas",
        String(replicas),
        "--cluster-yes",
      ],
      60_000,
    );
    await waitHealthy(replicas, 60_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    seeds: [...nodes.values()].map((n) => `${n.address}:6379`).join(","),
    view,
    waitHealthy,
    stop,
  };
}
