// Test helpers that start real processes: the relay (node packages/server/dist/main.js on
// port 0, in-process store or a Redis), a throwaway redis-server, and the built duet CLI.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { type RelayProcess, spawnRedis, spawnRelay } from "@duet/testkit";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(__dirname, "../../../..");
export const SERVER_MAIN = join(ROOT, "packages/server/dist/main.js");
export const CLI_MAIN = join(ROOT, "packages/client/dist/cli/main.js");

export type { RelayProcess } from "@duet/testkit";

/** Starts the relay on port 0 (it reports the port it bound); REDIS_URL is unset unless `env` sets it. */
export function startRelay(env: Record<string, string> = {}): Promise<RelayProcess> {
  const { REDIS_URL: _ignored, REDIS_CLUSTER_NODES: _ignoredToo, ...inherited } = process.env;
  return spawnRelay({
    main: SERVER_MAIN,
    env: {
      ...inherited,
      HOST: "127.0.0.1",
      RATE_LIMIT_ROOMS: "1000",
      ROOMS_PER_IP: "0",
      RATE_LIMIT_REQUESTS: "100000",
      STATS_CACHE_MS: "0",
      METRICS_CACHE_MS: "0",
      ...env,
    },
  });
}

/** A redis-server of our own on its own port (never the shared 6379), without persistence,
 * verified to be the process answering on its port. */
export async function startRedis(): Promise<{ url: string; stop(): Promise<void> }> {
  const redis = await spawnRedis();
  return { url: redis.url, stop: () => redis.stop() };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A running `duet` process; `done` resolves when it exits. */
export interface CliRun {
  child: ChildProcess;
  done: Promise<CliResult>;
  /** Resolves once stdout holds `count` lines. */
  lines(count: number): Promise<string[]>;
}

/** Starts the built CLI with its own state directory and relay URL. */
export function startCli(
  args: string[],
  options: { stateDir: string; url: string; stdin?: string; env?: Record<string, string> },
): CliRun {
  const child = spawn(process.execPath, [CLI_MAIN, ...args], {
    env: { ...process.env, DUET_STATE_DIR: options.stateDir, DUET_URL: options.url, ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const waiters: Array<() => void> = [];
  child.stdout!.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin!.end(options.stdin ?? "");
  const done = new Promise<CliResult>((resolveDone) =>
    child.once("close", (code) => resolveDone({ code, stdout, stderr })),
  );
  const lines = async (count: number): Promise<string[]> => {
    const current = () => stdout.split("\n").filter((line) => line !== "");
    while (current().length < count) {
      if (child.exitCode !== null)
        throw new Error(
          `duet ${args.join(" ")} exited with ${child.exitCode} before printing ${count} lines:\n${stdout}\n${stderr}`,
        );
      await Promise.race([new Promise<void>((wake) => waiters.push(wake)), new Promise((r) => setTimeout(r, 100))]);
    }
    return current();
  };
  return { child, done, lines };
}

/** Runs the CLI to completion. */
export function runCli(
  args: string[],
  options: { stateDir: string; url: string; stdin?: string; env?: Record<string, string> },
): Promise<CliResult> {
  return startCli(args, options).done;
}

const temporaryDirs: string[] = [];
/** A fresh directory under the temp dir, removed after the test file (passed or failed). */
export function temporaryDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temporaryDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of temporaryDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
