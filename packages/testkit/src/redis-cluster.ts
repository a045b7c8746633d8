// A real local Redis Cluster for tests: three masters spawned by spawnRedis (each
// verified on its own port), joined with redis-cli --cluster create.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { spawnRedis, type SpawnedRedis } from "./redis-server.js";

const run = promisify(execFile);

export interface SpawnedCluster {
  nodes: SpawnedRedis[];
  /** host:port,host:port,... as REDIS_CLUSTER_NODES wants it. */
  seeds: string;
  stop(): Promise<void>;
}

export async function spawnCluster(masters = 3): Promise<SpawnedCluster> {
  const nodes: SpawnedRedis[] = [];
  try {
    for (let i = 0; i < masters; i++) {
      nodes.push(await spawnRedis(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"]));
    }
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    await run("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"], { timeout: 30_000 });
    for (const node of nodes) {
      const client = new Redis(node.port, "127.0.0.1");
      try {
        for (const deadline = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 100))) {
          if (/cluster_state:ok/.test(await client.cluster("INFO"))) break;
          if (Date.now() > deadline) throw new Error(`cluster node ${node.port} never reached cluster_state:ok`);
        }
      } finally {
        client.disconnect();
      }
    }
    return { nodes, seeds: addresses.join(","), stop: async () => void (await Promise.all(nodes.map((node) => node.stop()))) };
  } catch (error) {
    await Promise.all(nodes.map((node) => node.stop()));
    throw error;
  }
}
