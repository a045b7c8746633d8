// Spawns throwaway redis-server processes (tests never touch a Redis they did not start,
// unless REDIS_URL names one on purpose).
//
// redis-server cannot listen on port 0 and report the port it got, so no port is picked
// and released for it to bind later (another process could take it in between, and a
// readiness check would then happily talk to the wrong server). Instead redis-server binds
// a candidate port itself: if the port is taken it exits and the next candidate is tried;
// once it answers, `INFO server` must show the pid of the process we spawned, so we know
// the port is held by our own child. Its directory is removed when it exits, however it
// ends, and a test process that exits kills the servers it still has.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

export const which = (bin: string) =>
  (process.env.PATH ?? "")
    .split(delimiter)
    .filter(Boolean)
    .map((dir) => join(dir, bin))
    .find((path) => {
      try {
        accessSync(path, constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });

/**
 * A candidate port for a server that must bind it itself: below Linux's ephemeral range
 * (32768-60999), so outgoing connections and `listen(0)` never take it. Only a candidate:
 * the server's own bind and an identity check decide.
 */
export const candidatePort = () => 20_000 + Math.floor(Math.random() * 12_000);

/** The pid the redis-server on this port reports in `INFO server`, or undefined if none answers. */
export const redisPid = (port: number) =>
  new Promise<number | undefined>((resolve) => {
    const socket = new Socket();
    let reply = "";
    const done = (pid: number | undefined) => {
      socket.destroy();
      resolve(pid);
    };
    socket.once("error", () => done(undefined));
    socket.once("close", () => done(undefined)); // e.g. not a Redis server at all
    socket.setTimeout(1000, () => done(undefined));
    socket.connect(port, "127.0.0.1", () => socket.write("INFO server\r\n"));
    socket.on("data", (data) => {
      reply += data.toString();
      if (reply.startsWith("-")) return done(undefined); // e.g. -LOADING: not ready yet
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(reply);
      if (match) done(Number(match[1]));
    });
  });

export interface SpawnedRedis {
  port: number;
  url: string;
  dir: string;
  process: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
/** SIGKILLs the child if this process exits first (a test worker that ends or is told to). */
export function killOnExit(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A test worker that exits with servers still running must not leave them behind.
  process.once("exit", () => {
    for (const c of live) c.kill("SIGKILL");
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts redis-server with the given extra arguments; resolves once the process we spawned
 * answers on its port. With `port`, only that port is tried (a restart in place); without,
 * candidates are tried until one is free. An extra `--dir` is the caller's to remove;
 * otherwise the server gets its own directory, removed when it exits.
 */
export async function spawnRedis(extraArgs: string[] = [], port?: number): Promise<SpawnedRedis> {
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH (node infra/scripts/test-prerequisites.mjs installs it)");
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 20; attempt++) {
    const chosenPort = port ?? candidatePort();
    const started = await startOnce(bin, extraArgs, chosenPort);
    if ("redis" in started) return started.redis;
    failures.push(`port ${chosenPort}: ${started.failure}`);
    if (port !== undefined && attempt >= 5) break; // a fixed port: a few tries, then give up
    if (port !== undefined) await sleep(200);
  }
  throw new Error(`redis-server did not start:\n${failures.join("\n")}`);
}

async function startOnce(bin: string, extraArgs: string[], port: number): Promise<{ redis: SpawnedRedis } | { failure: string }> {
  const dir = mkdtempSync(join(tmpdir(), "duet-redis-"));
  const child = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...extraArgs], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  killOnExit(child);
  let output = "";
  const keep = (data: Buffer) => void (output = (output + data.toString()).slice(-4000));
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => rmSync(dir, { recursive: true, force: true }));
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  for (const deadline = Date.now() + 10_000; ; await sleep(50)) {
    if (gone()) return { failure: `exited (${child.exitCode ?? child.signalCode}): ${lastLines(output)}` };
    const pid = await redisPid(port);
    if (pid === child.pid && !gone()) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      await exited;
      return { failure: pid === undefined ? "no answer within 10 s" : `answered by another process (pid ${pid})` };
    }
  }
  // Nobody reads the log after start: let it drain so a chatty server never blocks.
  child.stdout!.removeListener("data", keep).resume();
  child.stderr!.removeListener("data", keep).resume();
  const stop = (signal: NodeJS.Signals = "SIGTERM") =>
    new Promise<void>((resolve) => {
      if (gone()) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    }).then(() => rmSync(dir, { recursive: true, force: true }));
  return { redis: { port, url: `redis://127.0.0.1:${port}`, dir, process: child, stop } };
}

const lastLines = (text: string) => text.trim().split("\n").slice(-3).join(" | ") || "(no output)";
