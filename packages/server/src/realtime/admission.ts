// How many waiters (waiting recvs and statuses, open streams, held self-tests) this node may
// hold, in all (MAX_WAITERS: 503 `unavailable` past it) and per client address
// (MAX_WAITERS_PER_CLIENT: 429 `too_many_waiters`), so a node never grows until it is
// OOM-killed. Only waiting is refused, held waiters are never dropped, and readiness does not
// depend on the cap (any client can fill it). MAX_WAITERS=auto derives the cap from the
// cgroup's memory limit and the open-file limit. docs/streams.md, "A node's waiter cap".
import { readFileSync } from "node:fs";
import { ApiError } from "../errors.js";

/** Memory allowed per waiter: above the pinned runtime's long-poll (about 35 KB of RSS). */
export const WAITER_BUDGET_BYTES = 48 * 1024;
/** The node's own memory before any waiter: code, heap, Redis clients, buffers. */
export const MEMORY_RESERVE_BYTES = 128 * 1024 * 1024;
/** Descriptors kept for everything but waiters (Redis, calls being answered, files); a quarter of a smaller limit. */
export const DESCRIPTOR_RESERVE = 1024;
/** What a waiter refused at the node's cap is told to wait before it tries again. */
const RETRY_AFTER_SECONDS = 2;
/** What a client past its own bound is told to wait: its own waits end within 25 s. */
const CLIENT_RETRY_AFTER_SECONDS = 5;
/** MAX_WAITERS_PER_CLIENT=auto: this share of the node's cap, or NO_CAP_PER_CLIENT without a cap. */
export const CLIENT_SHARE = 1 / 8;
export const NO_CAP_PER_CLIENT = 1024;

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

/** The bound MAX_WAITERS_PER_CLIENT means: auto is a share of the node's cap (at least 1). */
export function perClientBound(setting: number | "auto" | "off", nodeMax: number | undefined): number | undefined {
  if (setting === "off") return undefined;
  if (setting !== "auto") return setting;
  return nodeMax === undefined ? NO_CAP_PER_CLIENT : Math.max(1, Math.floor(nodeMax * CLIENT_SHARE));
}

/** Why a waiter was not admitted: the node's cap, or its client's bound. */
export type Refusal = "node" | "client";

/** Gives back a place taken with reserve() (a second call gives back nothing more). */
export type Release = () => void;

export class WaiterAdmission {
  /** Waiters refused at the node's cap since the start. */
  refused = 0;
  /** Places taken now: every waiter from its admission until it ends (or gives up). */
  private taken = 0;
  /** Places taken by each client address that holds any. */
  private readonly byClient = new Map<string, number>();

  /**
   * @param max the most waiters this node holds; undefined: no cap
   * @param perClient the most one client address holds on this node; undefined: no bound
   */
  constructor(
    readonly max: number | undefined,
    readonly perClient: number | undefined = undefined,
  ) {}

  /** Waiters held now (and places reserved by waiters being set up). */
  get held(): number {
    return this.taken;
  }

  /** Places `client` holds now. */
  heldBy(client: string): number {
    return this.byClient.get(client) ?? 0;
  }

  /**
   * A place for one more waiter of `client`, or why not. The place counts from now until the
   * returned function is called, once, when the waiter ends (or gives up), so that calls set
   * up at the same time cannot all pass the cap.
   */
  reserve(client: string | undefined): Release | Refusal {
    if (this.max !== undefined && this.taken >= this.max) return "node";
    const key = client ?? "";
    const mine = this.byClient.get(key) ?? 0;
    if (this.perClient !== undefined && mine >= this.perClient) return "client";
    this.taken++;
    this.byClient.set(key, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.taken--;
      const left = (this.byClient.get(key) ?? 1) - 1;
      if (left > 0) this.byClient.set(key, left);
      else this.byClient.delete(key);
    };
  }

  /** The answer to a waiter that was not admitted. */
  refusal(why: Refusal): ApiError {
    if (why === "client") {
      const error = new ApiError(
        "too_many_waiters",
        `This address already holds ${this.perClient} waiting calls (recvs, statuses, streams, self-tests) on this relay node, the most one address may: let one end before you start another, or retry after Retry-After seconds.`,
      );
      error.retryAfterSeconds = CLIENT_RETRY_AFTER_SECONDS;
      return error;
    }
    this.refused++;
    const error = new ApiError(
      "unavailable",
      `This relay node holds as many waiting calls as it can (${this.max}): retry after Retry-After seconds (through a load balancer the retry may reach another node).`,
    );
    error.retryAfterSeconds = RETRY_AFTER_SECONDS;
    return error;
  }
}
