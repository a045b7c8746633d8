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

export interface SpawnedRedis {
  port: number;
  url: string;
  dir: string;
  process: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts redis-server on a free port with the given extra arguments; resolves once it answers. */
export async function spawnRedis(extraArgs: string[] = [], port?: number): Promise<SpawnedRedis> {
  const bin = which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH");
  const chosenPort = port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), "duet-redis-"));
  const child = spawn(bin, ["--port", String(chosenPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, ...extraArgs], {
    stdio: "ignore",
  });
  for (const deadline = Date.now() + 10_000; !(await pingRedis(chosenPort)); await new Promise((r) => setTimeout(r, 50))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`redis-server failed to start on port ${chosenPort}`);
    }
  }
  const stop = (signal: NodeJS.Signals = "SIGTERM") =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    }).finally(() => rmSync(dir, { recursive: true, force: true }));
  return { port: chosenPort, url: `redis://127.0.0.1:${chosenPort}`, dir, process: child, stop };
}
