// Redis topologies on a test network (netns.ts): a Sentinel-managed master with replicas,
// or a Redis Cluster, one redis-server per host namespace, each listening on its host's
// address (port 6379, 26379 for sentinels: every namespace has its own ports) and on a
// Unix socket in its own temp dir. The test process, outside the network, talks to every
// server through its socket (a path in the filesystem reaches into any namespace), so a
// partition cuts the servers and relays from each other, never the test from them.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { killOnExit } from "./redis-server.js";
import { which } from "./which.js";
import type { TestNetwork } from "./netns.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface NetRedis {
  host: string;
  address: string;
  port: number;
  /** Unix socket the test process reaches the server through. */
  socket: string;
  dir: string;
  process: ChildProcess;
}

/** A Redis question through a server's Unix socket; undefined when it cannot answer (within 1 s). */
export async function askAt<T>(socket: string, question: (client: Redis) => Promise<T>): Promise<T | undefined> {
  const client = new Redis({
    path: socket,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
    commandTimeout: 1000,
  });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return await question(client);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

const infoFields = (text: string | undefined) => {
  const fields: Record<string, string> = {};
  for (const line of (text ?? "").split("\r\n")) {
    const at = line.indexOf(":");
    if (at > 0 && !line.startsWith("#")) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
};

/** INFO <section> of a server, through its socket. */
export const infoAt = async (socket: string, section = "replication") =>
  infoFields(await askAt(socket, (c) => c.info(section)));

const dirs = new Set<string>();
let exitHookInstalled = false;
function removeOnExit(dir: string) {
  dirs.add(dir);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
}

/** redis-server (or a sentinel, with a config file) in a host's namespace; resolves once it answers as the process started. */
async function startOn(
  net: TestNetwork,
  host: string,
  port: number,
  build: (dir: string, socket: string) => string[],
): Promise<NetRedis> {
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH");
  const dir = mkdtempSync(join(tmpdir(), `duet-net-${host}-`));
  removeOnExit(dir);
  const socket = join(dir, "redis.sock");
  const child = net.spawn(host, bin, build(dir, socket), { stdio: "ignore" });
  killOnExit(child);
  for (const deadline = Date.now() + 10_000; ; await sleep(50)) {
    const info = await infoAt(socket, "server");
    // `ip netns exec` execs the program: the pid we hold is redis-server's own.
    if (Number(info.process_id) === child.pid) break;
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`redis-server on ${host} did not start`);
    }
  }
  return { host, address: net.host(host).address, port, socket, dir, process: child };
}

const stopAll = async (nodes: Iterable<NetRedis>) => {
  await Promise.all(
    [...nodes].map(
      (node) =>
        new Promise<void>((resolve) => {
          const child = node.process;
          const done = () => {
            rmSync(node.dir, { recursive: true, force: true });
            dirs.delete(node.dir);
            resolve();
          };
          if (child.exitCode !== null || child.signalCode !== null) return done();
          child.once("exit", done);
          child.kill("SIGKILL"); // also ends a stopped one
        }),
    ),
  );
};

// Protected mode off: the servers answer other hosts of the test network, which exists
// only inside namespaces the test created.
const dataArgs = (address: string, dir: string, socket: string, extra: string[]) => [
  "--port",
  "6379",
  "--bind",
  address,
  "--protected-mode",
  "no",
  "--unixsocket",
  socket,
  "--unixsocketperm",
  "700",
  "--save",
  "",
  "--appendonly",
  "no",
  "--dir",
  dir,
  "--enable-debug-command",
  "local",
  "--repl-diskless-sync",
  "yes",
  "--repl-diskless-sync-delay",
  "0",
  "--repl-ping-replica-period",
  "1",
  ...extra,
];

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
