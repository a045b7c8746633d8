// Metrics a benchmarked server process reports to the bench over IPC: memory, event-loop
// delay and CPU time. IPC rather than an extra HTTP route, so the product server gains no
// bench-only endpoint and the load generator's sockets are not involved.
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { writeHeapSnapshot } from "node:v8";

export interface NodeMetrics {
  rss: number;
  heapUsed: number;
  /** V8's committed heap: heapUsed plus the pages it keeps (young generation, freed old-space pages). */
  heapTotal: number;
  external: number;
  eldP50Ms: number;
  eldP99Ms: number;
  eldMaxMs: number;
  cpuUserUs: number;
  cpuSystemUs: number;
  /** Requests the node is holding open (waiting recvs), as the node counts them. */
  waiting: number;
  /** TCP connections the HTTP server holds. */
  connections: number;
  /** How long the main thread has been runnable but waiting for a CPU (Linux schedstat), ms since it started; NaN elsewhere. */
  runQueueMs: number;
  /** Connections the relay closed for a slow-client timeout (408 `request_timeout`), where the node counts them. */
  timedOut?: number;
}

export interface MetricsRequest {
  type: "metrics";
  id: number;
  /** Run a full GC first (the process must be started with --expose-gc). */
  gc?: boolean;
  /** Start a new event-loop delay window after this reading. */
  resetEld?: boolean;
}

/** Answers {type:"metrics"} IPC messages for the rest of the process's life. */
export function reportMetrics(
  sample: () => Promise<{ waiting: number; connections: number; timedOut?: number }>,
): void {
  // 10 ms resolution: the target is a p99 of 20 ms, finer sampling only costs CPU. The
  // histogram records whole timer intervals (an idle loop reads ~10 ms), so the interval is
  // subtracted to report the delay alone.
  const RESOLUTION_MS = 10;
  const eld = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  eld.enable();
  const delay = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS);
  // {type:"heapsnapshot", id, path}: a V8 heap snapshot after a full GC (the bench's
  // --heap-snapshot; what each waiting seat holds is read from a pair of them).
  process.on("message", (message: { type?: string; id?: number; path?: string }) => {
    if (message?.type !== "heapsnapshot" || !message.path) return;
    (globalThis as { gc?: () => void }).gc?.();
    writeHeapSnapshot(message.path);
    process.send?.({ type: "heapsnapshot", id: message.id });
  });
  process.on("message", (message: MetricsRequest) => {
    if (message?.type !== "metrics") return;
    const gc = (globalThis as { gc?: () => void }).gc;
    if (message.gc && gc) {
      // Twice: the first pass can leave weakly held and finalised objects for the second.
      gc();
      gc();
    }
    void sample().then(({ waiting, connections, timedOut }) => {
      const memory = process.memoryUsage();
      const cpu = process.cpuUsage();
      const metrics: NodeMetrics = {
        rss: memory.rss,
        heapUsed: memory.heapUsed,
        heapTotal: memory.heapTotal,
        external: memory.external,
        eldP50Ms: delay(eld.percentile(50)),
        eldP99Ms: delay(eld.percentile(99)),
        eldMaxMs: delay(eld.max),
        cpuUserUs: cpu.user,
        cpuSystemUs: cpu.system,
        runQueueMs: runQueueMs("self"),
        waiting,
        connections,
        timedOut,
      };
      if (message.resetEld) eld.reset();
      process.send?.({ type: "metrics", id: message.id, metrics });
    });
  });
}

/** A thread's time runnable but not running, ms (/proc/PID/schedstat's second field, for the main thread). */
export function runQueueMs(pid: number | "self"): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** The HTTP server's open connection count. */
export function connectionCount(server: import("node:http").Server): Promise<number> {
  return new Promise((resolve) => server.getConnections((_error, count) => resolve(count ?? 0)));
}
