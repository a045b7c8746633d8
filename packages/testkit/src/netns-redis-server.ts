// One redis-server (or sentinel) in a host's namespace of a test network (netns.ts), for
// the topologies of netns-sentinel.ts and netns-cluster.ts: each listens on its host's
// address (port 6379, 26379 for sentinels: every namespace has its own ports) and on a
// Unix socket in its own temp dir. The test process, outside the network, talks to every
// server through its socket (a path in the filesystem reaches into any namespace), so a
// partition cuts the servers and relays from each other, never the test from them.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { killOnExit } from "./redis-server.js";
import { which } from "./which.js";
import type { TestNetwork } from "./netns.js";

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
export async function startOn(
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

export const stopAll = async (nodes: Iterable<NetRedis>) => {
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
export const dataArgs = (address: string, dir: string, socket: string, extra: string[]) => [
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
