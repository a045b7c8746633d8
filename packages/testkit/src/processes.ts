// The relay as a process of its own, for every package's tests and for the local topology
// (infra/local/topology.mjs, which imports the built testkit).
//
// A relay started here binds port 0 and says which port it got in its "listening" log line,
// so no port is picked, released and bound later by someone else (docs/test-harness.md).
import { type ChildProcess, spawn } from "node:child_process";
import { killOnExit } from "./redis-server.js";

export interface RelayProcessOptions {
  /** The relay's entry point: packages/server/dist/main.js, what `pnpm start` runs. */
  main: string;
  /**
   * The relay's whole environment (nothing else is inherited). PORT is always 0, and
   * METRICS_PORT too unless it is `off`; HOST is 127.0.0.1 unless given; LOG_LEVEL must let the info-level "listening" line through.
   */
  env: Record<string, string | undefined>;
  /** Working directory of the process (default: this one's). */
  cwd?: string;
  /** Each chunk the relay writes to stdout or stderr, as it comes (to a log file, say). */
  onOutput?: (chunk: Buffer) => void;
  /** Keep everything it writes for logs() (default true; a long-lived harness sends it elsewhere). */
  keepOutput?: boolean;
  /**
   * How long it may take to report its port (default 60 s): a guard against a relay that never
   * starts, not a measure.
   */
  timeoutMs?: number;
  /**
   * A command that runs the relay, the relay's own command line appended: `["prlimit",
   * "--nofile=2048:2048", "--"]` starts it under an open-file limit from its first instruction.
   */
  wrapper?: string[];
}

export interface RelayProcess {
  /** http://127.0.0.1:<port>, as the relay reported it. */
  url: string;
  port: number;
  /** http://127.0.0.1:<port> of its metrics listener (GET /metrics), as it reported it; undefined when off. */
  metricsUrl?: string;
  child: ChildProcess;
  /** Everything the relay wrote to stdout and stderr so far (empty with keepOutput: false). */
  logs(): string;
  /** SIGTERM (the relay drains), then SIGKILL after graceMs (default 10 s); resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts the built relay on port 0 and resolves with the address it reported in its
 * "listening" line. It is killed when this process exits first; a relay that exits or stays
 * silent while starting is killed and the promise rejects with the end of its output.
 */
export async function spawnRelay(options: RelayProcessOptions): Promise<RelayProcess> {
  const keep = options.keepOutput ?? true;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const [command, ...args] = [...(options.wrapper ?? []), process.execPath, options.main];
  const child = spawn(command!, args, {
    env: {
      HOST: "127.0.0.1",
      ...options.env,
      PORT: "0",
      METRICS_PORT: options.env.METRICS_PORT === "off" ? "off" : "0",
    },
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  killOnExit(child);
  let output = "";
  let tail = ""; // the end of the output, for an error, even when nothing is kept
  let starting = true;
  const record = (chunk: Buffer) => {
    if (keep) output += chunk.toString();
    if (starting) tail = (tail + chunk.toString()).slice(-4000);
    options.onOutput?.(chunk);
  };
  child.stderr!.on("data", record);
  const { url, metricsUrl } = await new Promise<{ url: string; metricsUrl?: string }>((resolve, reject) => {
    let pending = "";
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`the relay (${options.main}) ${why}; the end of its output:\n${tail}`));
    };
    const timer = setTimeout(() => fail(`did not report its port within ${timeoutMs} ms`), timeoutMs);
    const onExit = (code: number | null, signal: string | null) => fail(`exited (${code ?? signal}) while starting`);
    child.once("exit", onExit);
    child.stdout!.on("data", (chunk: Buffer) => {
      record(chunk);
      if (!starting) return;
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        const entry = parseJson(line);
        if (entry?.msg !== "listening" || typeof entry.url !== "string") continue;
        starting = false;
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve({ url: entry.url, metricsUrl: typeof entry.metricsUrl === "string" ? entry.metricsUrl : undefined });
        return;
      }
    });
  });
  return {
    url,
    port: Number(new URL(url).port),
    metricsUrl,
    child,
    logs: () => output,
    stop: (graceMs = 10_000) => stopProcess(child, graceMs),
  };
}

function parseJson(line: string): { msg?: unknown; url?: unknown; metricsUrl?: unknown } | undefined {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** SIGTERM, then SIGKILL after graceMs (never, when Infinity); resolves once the process has exited. */
export function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const killer = Number.isFinite(graceMs) ? setTimeout(() => child.kill("SIGKILL"), graceMs) : undefined;
    child.once("exit", () => {
      clearTimeout(killer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}
