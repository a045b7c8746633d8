// A Sentinel-managed master with replicas on a test network (netns.ts), one redis-server
// or sentinel per host namespace (netns-redis-server.ts).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TestNetwork } from "./netns.js";
import { askAt, infoAt, type NetRedis, sleep, startOn, stopAll, dataArgs } from "./netns-redis-server.js";

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

export interface NetSentinelTopology {
  name: string;
  /** REDIS_SENTINELS for a relay on the network. */
  sentinels: string;
  nodes: Map<string, NetRedis>;
  sentinelNodes: Map<string, NetRedis>;
  /** The master's host, as a majority of the sentinels that answer report it. */
  masterHost(): Promise<string | undefined>;
  /** Waits until a majority of the sentinels names a master other than `host`, and it answers as master. */
  waitForNewMaster(host: string, timeoutMs?: number): Promise<string>;
  /** Waits until the master the sentinels name has `count` replicas online, and the sentinels know them. */
  waitForReplicas(count: number, timeoutMs?: number): Promise<void>;
  /** INFO replication of a data node (through its socket: never cut). */
  replication(host: string): Promise<Record<string, string>>;
  stop(): Promise<void>;
}

export async function spawnNetSentinel(net: TestNetwork, options: NetSentinelOptions): Promise<NetSentinelTopology> {
  const name = options.name ?? "duet";
  const quorum = Math.floor(options.sentinels.length / 2) + 1;
  const nodes = new Map<string, NetRedis>();
  const sentinelNodes = new Map<string, NetRedis>();
  const hostOf = (address: string) => [...nodes.values()].find((n) => n.address === address)?.host;
  const stop = () => stopAll([...nodes.values(), ...sentinelNodes.values()]);
  const [first, ...rest] = options.data;
  const masterAddress = net.host(first!).address;

  const masterHost = async () => {
    const answers = await Promise.all(
      [...sentinelNodes.values()].map((s) =>
        askAt(s.socket, (c) => c.call("SENTINEL", "get-master-addr-by-name", name) as Promise<[string, string] | null>),
      ),
    );
    const counts = new Map<string, number>();
    for (const answer of answers) if (answer) counts.set(answer[0], (counts.get(answer[0]) ?? 0) + 1);
    for (const [address, count] of counts) if (count >= quorum) return hostOf(address);
    return undefined;
  };
  const replication = (host: string) => infoAt(nodes.get(host)!.socket, "replication");
  const waitForReplicas = async (count: number, timeoutMs = 30_000) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const host = await masterHost();
      const info = host ? await replication(host) : {};
      const online = Object.entries(info).filter(([k, v]) => /^slave\d+$/.test(k) && v.includes("state=online")).length;
      if (info.role === "master" && online >= count) {
        const known = await Promise.all(
          [...sentinelNodes.values()].map((s) =>
            askAt(
              s.socket,
              async (c) =>
                ((await c.call("SENTINEL", "replicas", name)) as string[][]).filter(
                  (r) => !r.join(" ").match(/s_down|o_down|disconnected/),
                ).length,
            ),
          ),
        );
        if (known.filter((k) => (k ?? 0) >= count).length >= quorum) return;
      }
      if (Date.now() > deadline) throw new Error(`the master never had ${count} replicas online`);
    }
  };

  try {
    nodes.set(
      first!,
      await startOn(net, first!, 6379, (dir, socket) => dataArgs(masterAddress, dir, socket, options.nodeArgs ?? [])),
    );
    for (const host of rest) {
      const address = net.host(host).address;
      nodes.set(
        host,
        await startOn(net, host, 6379, (dir, socket) =>
          dataArgs(address, dir, socket, [...(options.nodeArgs ?? []), "--replicaof", masterAddress, "6379"]),
        ),
      );
    }
    for (const host of options.sentinels) {
      const address = net.host(host).address;
      sentinelNodes.set(
        host,
        await startOn(net, host, 26379, (dir, socket) => {
          const conf = join(dir, "sentinel.conf");
          writeFileSync(
            conf,
            [
              "port 26379",
              `bind ${address}`,
              "protected-mode no",
              `unixsocket ${socket}`,
              "unixsocketperm 700",
              `dir ${dir}`,
              `sentinel monitor ${name} ${masterAddress} 6379 ${quorum}`,
              `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
              `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 5000}`,
              `sentinel parallel-syncs ${name} 1`,
              "",
            ].join("\n"),
          );
          return [conf, "--sentinel"];
        }),
      );
    }
    await waitForReplicas(rest.length);
    for (const deadline = Date.now() + 30_000; ; await sleep(100)) {
      const peers = await Promise.all(
        [...sentinelNodes.values()].map((s) =>
          askAt(s.socket, async (c) => ((await c.call("SENTINEL", "sentinels", name)) as unknown[]).length),
        ),
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
    sentinels: [...sentinelNodes.values()].map((s) => `${s.address}:26379`).join(","),
    nodes,
    sentinelNodes,
    masterHost,
    async waitForNewMaster(old, timeoutMs = 30_000) {
      for (const deadline = Date.now() + timeoutMs; ; await sleep(50)) {
        const host = await masterHost();
        if (host !== undefined && host !== old && (await replication(host)).role === "master") return host;
        if (Date.now() > deadline) throw new Error(`no new master after ${timeoutMs} ms (was ${old})`);
      }
    },
    waitForReplicas,
    replication,
    stop,
  };
}
