// Spawns throwaway redis-server processes (tests never touch a Redis they did not start,
// unless REDIS_URL names one on purpose).
//
// redis-server cannot listen on port 0 and report the port it got, so no port is picked
// and released for it to bind later (another process could take it in between, and a
// readiness check would then happily talk to the wrong server). Instead redis-server binds
// a candidate port itself: if the port is taken it exits and the next candidate is tried;
// once it answers, `INFO server` must show the pid of the process we spawned, so we know
// the port is held by our own child. Directories the fixture creates are removed at stop()
// or when the test process exits, and a test process that exits kills the servers it
// still has.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RedisAt } from "./ask.js";
import { which } from "./which.js";

/**
 * A candidate port for a server that must bind it itself (redis-server, redis-sentinel):
 * below Linux's ephemeral range (32768-60999), so outgoing connections and `listen(0)`
 * never take it. Only a candidate: the server's own bind and waitForProcess decide.
 */
export const candidatePort = () => 20_000 + Math.floor(Math.random() * 12_000);

/**
 * INFO of the server at a loopback port or Unix socket (one section), or undefined when
 * nothing answers like Redis within a second. Lets a fixture check it reached the process
 * it started (process_id), not whatever else holds the port.
 */
export const redisInfo = (at: RedisAt, section = "server") =>
  new Promise<Record<string, string> | undefined>((resolve) => {
    let buffer = "";
    const socket = new Socket().once("error", () => resolve(undefined));
    socket.once("close", () => resolve(undefined)); // e.g. not a Redis server at all
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(undefined);
    });
    const onConnect = () => socket.write(`INFO ${section}\r\n`);
    if (typeof at === "number") socket.connect(at, "127.0.0.1", onConnect);
    else socket.connect(at, onConnect);
    socket.on("data", (data) => {
      buffer += data.toString();
      const header = /^\$(\d+)\r\n/.exec(buffer);
      if (!header) {
        if (buffer.includes("\r\n")) {
          // an error reply (e.g. LOADING)
          socket.destroy();
          resolve(undefined);
        }
        return;
      }
      if (Buffer.byteLength(buffer) < header[0].length + Number(header[1])) return;
      socket.destroy();
      const fields: Record<string, string> = {};
      for (const line of buffer.slice(header[0].length).split("\r\n")) {
        const at = line.indexOf(":");
        if (at > 0 && !line.startsWith("#")) fields[line.slice(0, at)] = line.slice(at + 1);
      }
      resolve(fields);
    });
  });

/**
 * Resolves once the process we spawned answers at its port or socket (its own process_id
 * in INFO; `ip netns exec` execs the program, so there too the pid is redis-server's own).
 */
export async function waitForProcess(
  child: ChildProcess,
  at: RedisAt,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  killOnExit(child);
  for (const deadline = Date.now() + timeoutMs; ; await new Promise((r) => setTimeout(r, 50))) {
    const info = await redisInfo(at);
    if (info && Number(info.process_id) === child.pid) return;
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(
        `${what} failed to start at ${at}${info ? ` (another process, pid ${info.process_id}, answers there)` : " (taken?)"}`,
      );
    }
  }
}

const live = new Set<ChildProcess>();
const ownDirs = new Set<string>();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A test worker that exits with servers still running must not leave them (or their
  // directories) behind.
  process.once("exit", () => {
    for (const child of live) child.kill("SIGKILL");
    for (const dir of ownDirs) rmSync(dir, { recursive: true, force: true });
  });
}
/** SIGKILLs the child if this process exits first (a test worker that ends or is told to). */
export function killOnExit(child: ChildProcess): void {
  if (live.has(child)) return;
  live.add(child);
  child.once("exit", () => live.delete(child));
  installExitHook();
}
function removeDir(dir: string) {
  rmSync(dir, { recursive: true, force: true });
  ownDirs.delete(dir);
}
/** A new temp directory of the fixture's own, removed at stop (stopper) or when this process exits. */
export function ownDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  ownDirs.add(dir);
  installExitHook();
  return dir;
}
/** stop() of a server: `signal` (SIGKILL also ends a SIGSTOPped one), then its directory is removed. */
export const stopper =
  (child: ChildProcess, dir: string) =>
  (signal: NodeJS.Signals = "SIGTERM") =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    }).finally(() => removeDir(dir));

/** Where a server listens, and its directory: the arguments every fixture's redis-server starts with. */
export interface Listen {
  port: number;
  bind: string;
  dir: string;
  /** A Unix socket too (the way in to a server inside a network namespace). */
  socket?: string;
}

/**
 * redis-server's arguments for `listen`: nothing saved to disk unless the caller's later
 * arguments say so. Protected mode is off with a socket: those servers answer the other
 * hosts of a test network, which exists only inside namespaces the test created.
 */
export const serverArgs = ({ port, bind, dir, socket }: Listen) => [
  "--port",
  String(port),
  "--bind",
  bind,
  ...(socket ? ["--protected-mode", "no", "--unixsocket", socket, "--unixsocketperm", "700"] : []),
  "--save",
  "",
  "--appendonly",
  "no",
  "--dir",
  dir,
];

export interface SpawnedRedis {
  port: number;
  url: string;
  dir: string;
  process: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface SpawnOptions {
  /** Reuse this data directory (a restart on the same port keeps nodes.conf, the AOF). Removed at stop. */
  dir?: string;
}

/**
 * Starts redis-server on a candidate port (or the one given: a restart in place) with the
 * given extra arguments; resolves once the process it started answers there. A candidate
 * that is taken makes redis-server exit, and the next one is tried; a given port gets a
 * few tries. An extra `--dir` argument is the caller's to remove.
 */
export async function spawnRedis(
  extraArgs: string[] = [],
  port?: number,
  options: SpawnOptions = {},
): Promise<SpawnedRedis> {
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH (node infra/scripts/test-prerequisites.mjs installs it)");
  const failures: string[] = [];
  for (let attempt = 1; ; attempt++) {
    const chosenPort = port ?? candidatePort();
    const dir = options.dir ?? ownDir("duet-redis-");
    ownDirs.add(dir);
    try {
      return await startOn(bin, chosenPort, dir, extraArgs);
    } catch (error) {
      if (!options.dir) removeDir(dir);
      failures.push((error as Error).message);
      if (attempt >= (port === undefined ? 20 : 5))
        throw new Error(`redis-server did not start:\n${failures.join("\n")}`);
      if (port !== undefined) await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function startOn(bin: string, port: number, dir: string, extraArgs: string[]): Promise<SpawnedRedis> {
  const child = spawn(bin, [...serverArgs({ port, bind: "127.0.0.1", dir }), ...extraArgs], { stdio: "ignore" });
  await waitForProcess(child, port, "redis-server");
  return { port, url: `redis://127.0.0.1:${port}`, dir, process: child, stop: stopper(child, dir) };
}
