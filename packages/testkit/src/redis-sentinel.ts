// A real local Sentinel topology for tests: a master, its replicas and three sentinels,
// all redis-server processes, each verified on its own port (Sentinel mode is `redis-server <conf> --sentinel`).
// Each sentinel gets its own writable config file (Sentinel rewrites it) in its own temp
// dir, removed at stop. Helpers find the current master and force failovers.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ask } from "./ask.js";
import { which } from "./which.js";
import { candidatePort, redisInfo, spawnRedis, waitForProcess, type SpawnedRedis } from "./redis-server.js";

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

export interface SpawnedSentinelProcess {
  port: number;
  process: ChildProcess;
}

export interface SpawnedSentinelTopology {
  name: string;
  /** host:port,… as REDIS_SENTINELS wants it. */
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function spawnSentinelTopology(options: SentinelOptions = {}): Promise<SpawnedSentinelTopology> {
  const name = options.name ?? "duet";
  const replicaCount = options.replicas ?? 2;
  const sentinelCount = options.sentinels ?? 3;
  const quorum = Math.floor(sentinelCount / 2) + 1;
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH");
  // DEBUG SLEEP (a hung master) needs the debug command since Redis 7. Replicas sync
  // without touching the disk.
  const nodeArgs = [
    "--enable-debug-command",
    "local",
    "--repl-diskless-sync",
    "yes",
    "--repl-diskless-sync-delay",
    "0",
    "--repl-ping-replica-period",
    "1",
    ...(options.nodeArgs ?? []),
    ...(options.logFile ? ["--logfile", options.logFile] : []),
  ];
  const nodes = new Map<number, SpawnedRedis>();
  const sentinelProcesses: SpawnedSentinelProcess[] = [];
  const sentinelDirs: string[] = [];

  const stop = async () => {
    const exits = [...nodes.values()].map((node) => node.process).concat(sentinelProcesses.map((s) => s.process));
    await Promise.all(
      exits.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once("exit", () => resolve());
            child.kill("SIGKILL"); // also ends a SIGSTOPped process
          }),
      ),
    );
    await Promise.all([...nodes.values()].map((node) => node.stop()));
    for (const dir of sentinelDirs) rmSync(dir, { recursive: true, force: true });
  };

  const masterPort = async (): Promise<number | undefined> => {
    const answers = await Promise.all(
      sentinelProcesses.map((s) =>
        ask(s.port, (c) => c.call("SENTINEL", "get-master-addr-by-name", name) as Promise<[string, string] | null>),
      ),
    );
    const counts = new Map<number, number>();
    for (const answer of answers) if (answer) counts.set(Number(answer[1]), (counts.get(Number(answer[1])) ?? 0) + 1);
    for (const [port, count] of counts) if (count >= quorum) return port;
    return undefined;
  };

  const isMaster = async (port: number) => (await redisInfo(port, "replication"))?.role === "master";

  const waitForReplicas = async (count: number, timeoutMs = 20_000) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const port = await masterPort();
      const info = port === undefined ? undefined : await redisInfo(port, "replication");
      const online = Object.entries(info ?? {}).filter(
        ([key, value]) => /^slave\d+$/.test(key) && value.includes("state=online"),
      ).length;
      if (info?.role === "master" && online >= count) {
        // ...and the sentinels know them (they learn replicas from the master's INFO).
        const known = await Promise.all(
          sentinelProcesses.map((s) =>
            ask(
              s.port,
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
    const master = await spawnRedis(nodeArgs);
    nodes.set(master.port, master);
    for (let i = 0; i < replicaCount; i++) {
      const replica = await spawnRedis([...nodeArgs, "--replicaof", "127.0.0.1", String(master.port)]);
      nodes.set(replica.port, replica);
    }
    for (let i = 0; i < sentinelCount; i++) {
      const dir = mkdtempSync(join(tmpdir(), "duet-sentinel-"));
      sentinelDirs.push(dir);
      const conf = join(dir, "sentinel.conf");
      for (let attempt = 1; ; attempt++) {
        const port = candidatePort();
        writeFileSync(
          conf,
          [
            `port ${port}`,
            "bind 127.0.0.1",
            `dir ${dir}`,
            `sentinel monitor ${name} 127.0.0.1 ${master.port} ${quorum}`,
            `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
            `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 5000}`,
            `sentinel parallel-syncs ${name} 1`,
            ...(options.logFile ? [`logfile ${options.logFile}`] : []),
            "",
          ].join("\n"),
        );
        const child = spawn(bin, [conf, "--sentinel"], { stdio: "ignore" });
        try {
          await waitForProcess(child, port, "redis-sentinel");
          sentinelProcesses.push({ port, process: child });
          break;
        } catch (error) {
          if (attempt >= 20) throw error;
        }
      }
    }
    for (const sentinel of sentinelProcesses) {
      const mode = (await redisInfo(sentinel.port))?.redis_mode;
      if (mode !== "sentinel") throw new Error(`port ${sentinel.port} answers in ${mode} mode, not sentinel`);
    }
    // Ready: a majority agrees on the master, every replica is online, and the sentinels
    // see each other (they need to, to elect a leader for a failover).
    await waitForReplicas(replicaCount);
    for (const deadline = Date.now() + 20_000; ; await sleep(100)) {
      const peers = await Promise.all(
        sentinelProcesses.map((s) =>
          ask(s.port, async (c) => ((await c.call("SENTINEL", "sentinels", name)) as unknown[]).length),
        ),
      );
      if (peers.every((count) => count === sentinelCount - 1)) break;
      if (Date.now() > deadline) throw new Error("the sentinels never discovered each other");
    }
  } catch (error) {
    await stop();
    throw error;
  }

  const waitForNewMaster = async (port: number, timeoutMs = 30_000) => {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(50)) {
      const current = await masterPort();
      if (current !== undefined && current !== port && (await isMaster(current))) return current;
      if (Date.now() > deadline) throw new Error(`no new master after ${timeoutMs} ms (was ${port})`);
    }
  };

  return {
    name,
    sentinels: sentinelProcesses.map((s) => `127.0.0.1:${s.port}`).join(","),
    sentinelProcesses,
    nodes,
    masterPort,
    async master() {
      const port = await masterPort();
      const node = port === undefined ? undefined : nodes.get(port);
      if (!node) throw new Error("the sentinels agree on no master we started");
      return node;
    },
    waitForNewMaster,
    waitForReplicas,
    async sentinelFailover() {
      const before = await masterPort();
      if (before === undefined) throw new Error("no master to fail over");
      // A sentinel refuses while a previous failover is still settling (INPROG/NOGOODSLAVE): retry.
      for (const deadline = Date.now() + 20_000; ; await sleep(250)) {
        const answer = await ask(sentinelProcesses[0]!.port, (c) =>
          c.call("SENTINEL", "FAILOVER", name).catch((e: Error) => e.message),
        );
        if (answer === "OK") break;
        if (Date.now() > deadline) throw new Error(`SENTINEL FAILOVER kept failing: ${answer}`);
      }
      await waitForNewMaster(before);
    },
    async restart(port: number, restartOptions: RestartOptions = {}) {
      const old = nodes.get(port);
      if (restartOptions.empty && old?.dir)
        for (const file of readdirSync(old.dir)) rmSync(join(old.dir, file), { recursive: true, force: true });
      const current = restartOptions.as === "master" ? undefined : await masterPort();
      const node = await spawnRedis(
        [
          ...nodeArgs,
          ...(current !== undefined && current !== port ? ["--replicaof", "127.0.0.1", String(current)] : []),
        ],
        port,
        {
          dir: old?.dir,
        },
      );
      nodes.set(port, node);
      return node;
    },
    stop,
  };
}
