// Spawns throwaway redis-server processes on free ports (tests never touch a Redis they
// did not start, unless REDIS_URL names one on purpose).
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { createServer, Socket } from "node:net";
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

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

export const pingRedis = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = new Socket().once("error", () => resolve(false));
    socket.setTimeout(1000, () => (socket.destroy(), resolve(false)));
    socket.connect(port, "127.0.0.1", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolve(data.toString().startsWith("+PONG"));
    });
  });

/**
 * INFO of the server on a loopback port (one section), or undefined when nothing answers
 * like Redis within a second. Lets a fixture check it reached the process it started
 * (process_id), not whatever else grabbed a free port in the meantime.
 */
export const redisInfo = (port: number, section = "server") =>
  new Promise<Record<string, string> | undefined>((resolve) => {
    let buffer = "";
    const socket = new Socket().once("error", () => resolve(undefined));
    socket.setTimeout(1000, () => (socket.destroy(), resolve(undefined)));
    socket.connect(port, "127.0.0.1", () => socket.write(`INFO ${section}\r\n`));
    socket.on("data", (data) => {
      buffer += data.toString();
      const header = /^\$(\d+)\r\n/.exec(buffer);
      if (!header) {
        if (buffer.includes("\r\n")) (socket.destroy(), resolve(undefined)); // an error reply (e.g. LOADING)
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

/** Resolves once the process we spawned answers on its port (its own process_id in INFO). */
export async function waitForProcess(child: ChildProcess, port: number, what: string, timeoutMs = 10_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; await new Promise((r) => setTimeout(r, 50))) {
    const info = await redisInfo(port);
    if (info && Number(info.process_id) === child.pid) return;
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${what} failed to start on port ${port}${info ? ` (another process, pid ${info.process_id}, answers there)` : ""}`);
    }
  }
}

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
 * Starts redis-server on a free port (or the one given) with the given extra arguments;
 * resolves once the process it started answers there. On a free port taken by someone else
 * in the meantime, tries another.
 */
export async function spawnRedis(extraArgs: string[] = [], port?: number, options: SpawnOptions = {}): Promise<SpawnedRedis> {
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH");
  for (let attempt = 1; ; attempt++) {
    const chosenPort = port ?? (await freePort());
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), "duet-redis-"));
    try {
      return await startOn(bin, chosenPort, dir, extraArgs);
    } catch (error) {
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
      if (port !== undefined || attempt >= 3) throw error;
    }
  }
}

async function startOn(bin: string, chosenPort: number, dir: string, extraArgs: string[]): Promise<SpawnedRedis> {
  const child = spawn(bin, ["--port", String(chosenPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...extraArgs], {
    stdio: "ignore",
  });
  await waitForProcess(child, chosenPort, "redis-server");
  const stop = (signal: NodeJS.Signals = "SIGTERM") =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    }).finally(() => rmSync(dir, { recursive: true, force: true }));
  return { port: chosenPort, url: `redis://127.0.0.1:${chosenPort}`, dir, process: child, stop };
}
