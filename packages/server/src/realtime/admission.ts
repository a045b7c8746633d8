// How many waiters (waiting recvs and statuses, open streams) this node may hold, and the
// refusal beyond it. A waiter costs memory for as long as it waits (docs/runtime.md,
// docs/streams.md: tens of KB of RSS each); a pod past its memory limit is OOM-killed and
// every waiter it held reconnects to the other pods at once, which then fill up in turn.
// So past the cap a new waiter is answered 503 `unavailable` with Retry-After (a call that
// has its answer at once is still served: only waiting is refused), and /readyz reports not
// ready, so that a load balancer sends new waiters to another node. Waiters already held
// are never dropped for it.
//
// MAX_WAITERS=auto (the default) derives the cap from what the process may use: the
// cgroup's memory limit (a container's, a pod's) less a fixed reserve, at WAITER_BUDGET_BYTES
// per waiter, and the open-file limit less a reserve (each waiter holds a socket).
import { readFileSync } from "node:fs";
import { ApiError } from "../errors.js";

/** Memory allowed per waiter: above the pinned runtime's long-poll (about 35 KB of RSS). */
export const WAITER_BUDGET_BYTES = 48 * 1024;
/** The node's own memory before any waiter: code, heap, Redis clients, buffers. */
export const MEMORY_RESERVE_BYTES = 128 * 1024 * 1024;
/** Descriptors kept for everything but waiters (Redis, calls being answered, files); a quarter of a smaller limit. */
export const DESCRIPTOR_RESERVE = 1024;
/** Readiness comes back once the held waiters are this share of the cap or fewer. */
const READY_AGAIN_SHARE = 0.9;
/** What a refused waiter is told to wait before it tries again. */
const RETRY_AFTER_SECONDS = 2;

/** The cgroup's memory limit in bytes (v2, then v1), or undefined when there is none. */
export function cgroupMemoryLimit(read: (path: string) => string = (p) => readFileSync(p, "utf8")): number | undefined {
  for (const path of ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]) {
    let text: string;
    try {
      text = read(path).trim();
    } catch {
      continue;
    }
    const bytes = Number(text);
    // v2 writes "max"; v1 writes a huge number (a page-rounded 2^63) when there is no limit.
    if (Number.isFinite(bytes) && bytes > 0 && bytes < 2 ** 50) return bytes;
    return undefined;
  }
  return undefined;
}

/** The process's soft limit on open files (Linux /proc), or undefined. */
export function openFileLimit(read: (path: string) => string = (p) => readFileSync(p, "utf8")): number | undefined {
  try {
    const line = read("/proc/self/limits")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    return Number.isFinite(soft) && soft > 0 ? soft : undefined;
  } catch {
    return undefined;
  }
}

/** The cap MAX_WAITERS=auto means, and what it came from (logged at start). */
export function automaticWaiterCap(limits: { memoryBytes?: number; openFiles?: number }): {
  max?: number;
  from: string;
} {
  const byMemory =
    limits.memoryBytes === undefined
      ? undefined
      : Math.max(0, Math.floor((limits.memoryBytes - MEMORY_RESERVE_BYTES) / WAITER_BUDGET_BYTES));
  // A small limit (a container's 1,024, say) keeps a quarter for everything else.
  const byFiles =
    limits.openFiles === undefined
      ? undefined
      : limits.openFiles - Math.min(DESCRIPTOR_RESERVE, Math.floor(limits.openFiles / 4));
  if (byMemory === undefined && byFiles === undefined) return { from: "no memory or open-file limit found" };
  if (byFiles === undefined || (byMemory !== undefined && byMemory <= byFiles))
    return { max: byMemory, from: `memory limit ${Math.round(limits.memoryBytes! / 2 ** 20)} MiB` };
  return { max: byFiles, from: `open-file limit ${limits.openFiles}` };
}

export class WaiterAdmission {
  /** Waiters refused since the start. */
  refused = 0;
  private full = false;
  /** Places taken by waiters being set up (their reads before they are registered). */
  private reserved = 0;

  /**
   * @param max the most waiters this node holds; undefined: no cap
   * @param held how many it holds now
   */
  constructor(
    readonly max: number | undefined,
    private readonly held: () => number,
  ) {}

  /**
   * A place for one more waiter, or undefined past the cap. The place counts from now until
   * the returned function is called (once the waiter is registered, or when it gives up), so
   * that calls set up at the same time cannot all pass the cap.
   */
  reserve(): (() => void) | undefined {
    if (!this.admits()) return undefined;
    this.reserved++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.reserved--;
    };
  }

  /** Whether one more waiter may wait now. */
  admits(): boolean {
    if (this.max === undefined) return true;
    const held = this.held() + this.reserved;
    if (held >= this.max) this.full = true;
    else if (held <= this.max * READY_AGAIN_SHARE) this.full = false;
    return held < this.max;
  }

  /** Not ready from the cap until the held waiters are back to 90 % of it. */
  ready(): boolean {
    this.admits();
    return !this.full;
  }

  /** The answer to a waiter beyond the cap. */
  refusal(): ApiError {
    this.refused++;
    const error = new ApiError(
      "unavailable",
      `This relay node holds as many waiting calls as it can (${this.max}): retry after Retry-After seconds (through a load balancer the retry may reach another node).`,
    );
    error.retryAfterSeconds = RETRY_AFTER_SECONDS;
    return error;
  }
}
