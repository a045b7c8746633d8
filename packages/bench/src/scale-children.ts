// The scale run's child processes (src/scale.ts): every one it starts is recorded, so that
// every way out (an exit, a signal) ends them by PID; and the client processes
// (src/scale-client.ts), each driven by request and answer over IPC.
import { type ChildProcess, fork } from "node:child_process";
import { join } from "node:path";
import { removeContainers } from "./container-node.js";
import type { ClientRequest } from "./scale-messages.js";

// Every process this run starts, by PID, so that every way out can end them.
export const children = new Set<ChildProcess>();
/** The relay nodes' PIDs (startServer's children end themselves when this process goes away, after a drain). */
export const nodePids = new Set<number>();
export function killAll(): void {
  removeContainers();
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  for (const pid of nodePids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

/** One client process with a request/answer helper over IPC. */
export class ClientProcess {
  readonly child: ChildProcess;
  private readonly waiting = new Map<string, (message: never) => void>();
  constructor(readonly index: number) {
    this.child = fork(join(__dirname, "scale-client.js"), [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
    children.add(this.child);
    this.child.on("message", (message: { type: string }) => {
      const resolve = this.waiting.get(message.type);
      if (resolve) {
        this.waiting.delete(message.type);
        resolve(message as never);
      }
      if (message.type === "failed") for (const r of this.waiting.values()) r(message as never);
    });
  }
  next<T>(type: string, timeoutMs = 30 * 60_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`client ${this.index}: no ${type} in ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiting.set(type, (message) => {
        clearTimeout(timer);
        const m = message as { type: string; error?: string };
        if (m.type === "failed") reject(new Error(`client ${this.index}: ${m.error}`));
        else resolve(message as T);
      });
    });
  }
  request<T>(message: ClientRequest, answer: string, timeoutMs?: number): Promise<T> {
    const reply = this.next<T>(answer, timeoutMs);
    this.child.send(message);
    return reply;
  }
  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      const timer = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
      this.child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.send({ type: "stop" } satisfies ClientRequest);
    });
  }
}
