// Where the Sentinel and Cluster fixtures (redis-sentinel.ts, redis-cluster.ts) start their
// servers: one topology code, two places.
// - loopback: each server on a candidate port of 127.0.0.1 (spawnRedis), reached there.
// - a test network (netns.ts): each server in its host's namespace, on the host's address
//   and the standard port (6379, 26379 for sentinels: every namespace has its own ports),
//   and on a Unix socket in its own temp dir. The test process, outside the network, talks
//   to every server through its socket, so a partition cuts the servers and relays from
//   each other, never the test from them.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import type { RedisAt } from "./ask.js";
import type { TestNetwork } from "./netns.js";
import {
  candidatePort,
  type Listen,
  ownDir,
  serverArgs,
  spawnRedis,
  type SpawnedRedis,
  stopper,
  waitForProcess,
} from "./redis-server.js";
import { which } from "./which.js";

const run = promisify(execFile);

/** A server a place started. */
export interface PlacedRedis<K> extends SpawnedRedis {
  /** What a topology knows it by: its port on loopback, its host on a test network. */
  key: K;
  /** The address other servers and the relays reach it at (with `port`). */
  address: string;
  /** Where the test process reaches it (ask, redisInfo). */
  at: RedisAt;
}

export interface Place<K> {
  /** A data node on `host` (loopback: any name); `again` restarts one on its port with its directory. */
  data(host: string, args: string[], again?: { port: number; dir: string }): Promise<PlacedRedis<K>>;
  /** A sentinel on `host`, its config file `lines` after where it listens. */
  sentinel(host: string, lines: string[]): Promise<PlacedRedis<K>>;
  /** Runs redis-cli from `host`, where it reaches every server. */
  cli(host: string, args: string[], timeoutMs: number): Promise<void>;
}

const redisServer = () => {
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH (node infra/scripts/test-prerequisites.mjs installs it)");
  return bin;
};

/** A sentinel's config file in its directory: where it listens, then `lines`; redis-server's arguments to run it. */
const sentinelConf = ({ port, bind, dir, socket }: Listen, lines: string[]) => {
  const conf = join(dir, "sentinel.conf");
  writeFileSync(
    conf,
    [
      `port ${port}`,
      `bind ${bind}`,
      ...(socket ? ["protected-mode no", `unixsocket ${socket}`, "unixsocketperm 700"] : []),
      `dir ${dir}`,
      ...lines,
      "",
    ].join("\n"),
  );
  return [conf, "--sentinel"];
};

const placed = <K>(key: K, address: string, port: number, at: RedisAt, dir: string, child: ChildProcess) => ({
  key,
  address,
  port,
  at,
  url: `redis://${address}:${port}`,
  dir,
  process: child,
  stop: stopper(child, dir),
});

/** Servers on 127.0.0.1, each on a candidate port, known by it. */
export const loopback: Place<number> = {
  async data(_host, args, again) {
    const redis = await spawnRedis(args, again?.port, { dir: again?.dir });
    return { ...redis, key: redis.port, address: "127.0.0.1", at: redis.port };
  },
  async sentinel(_host, lines) {
    const bin = redisServer();
    const dir = ownDir("duet-sentinel-");
    for (let attempt = 1; ; attempt++) {
      const port = candidatePort(); // a taken one makes the sentinel exit: the next is tried
      const child = spawn(bin, sentinelConf({ port, bind: "127.0.0.1", dir }, lines), { stdio: "ignore" });
      try {
        await waitForProcess(child, port, "redis-sentinel");
        return placed(port, "127.0.0.1", port, port, dir, child);
      } catch (error) {
        if (attempt >= 20) throw error;
      }
    }
  },
  async cli(_host, args, timeoutMs) {
    await run("redis-cli", args, { timeout: timeoutMs });
  },
};

/** Servers in the host namespaces of a test network, known by their host. */
export function onNetwork(net: TestNetwork): Place<string> {
  const start = async (host: string, port: number, args: (where: Listen) => string[]) => {
    const bin = redisServer();
    const { address } = net.host(host);
    const dir = ownDir(`duet-net-${host}-`);
    const socket = join(dir, "redis.sock");
    const child = net.spawn(host, bin, args({ port, bind: address, dir, socket }), { stdio: "ignore" });
    await waitForProcess(child, socket, `redis-server on ${host}`);
    return placed(host, address, port, socket, dir, child);
  };
  return {
    data: (host, args) => start(host, 6379, (where) => [...serverArgs(where), ...args]),
    sentinel: (host, lines) => start(host, 26379, (where) => sentinelConf(where, lines)),
    async cli(host, args, timeoutMs) {
      const cli = which("redis-cli");
      if (!cli) throw new Error("redis-cli is not on PATH");
      await net.exec(host, cli, args, timeoutMs);
    },
  };
}

/** Ends every server given (SIGKILL also ends a SIGSTOPped one) and removes their directories. */
export const stopAll = async (nodes: Iterable<SpawnedRedis>) =>
  void (await Promise.all([...nodes].map((node) => node.stop("SIGKILL"))));

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What replication in the topologies needs: DEBUG SLEEP (a hung master) needs the debug
 * command since Redis 7; replicas sync without touching the disk.
 */
export const REPLICATION_ARGS = [
  "--enable-debug-command",
  "local",
  "--repl-diskless-sync",
  "yes",
  "--repl-diskless-sync-delay",
  "0",
];
