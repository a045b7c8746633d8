// Long-poll recv: answer at once when something is pending, otherwise wait for a wake-up,
// the room's end (404), or the wait running out (empty list). Shared by both stores.
import type { InboxSnapshot, RoomStore, SeatCredentials, WakeEvent } from "../store/room-store.js";

type WakeReason = "wake" | "timer" | "aborted" | "drained";

/** How often a recv re-reads when it could not subscribe to wake-ups. */
const UNSUBSCRIBED_RECHECK_MS = 1000;

/** One waiting recv: collects wake-ups so none is lost between a read and the next wait. */
class Waiter {
  private pendingWake = false;
  private pendingFinal?: WakeReason;
  private resolve?: (reason: WakeReason) => void;

  constructor(private readonly seat: () => string) {}

  /** Wake-ups for the other seat's inbox are not ours. */
  onEvent = (event: WakeEvent): void => {
    if (event === "closed" || event === "resync" || event === this.seat()) this.fire("wake");
  };

  fire(reason: WakeReason): void {
    if (this.resolve) {
      const resolve = this.resolve;
      this.resolve = undefined;
      resolve(reason);
    } else if (reason === "wake") {
      this.pendingWake = true;
    } else {
      this.pendingFinal = reason;
    }
  }

  next(timeoutMs: number): Promise<WakeReason> {
    if (this.pendingFinal) return Promise.resolve(this.pendingFinal);
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve("wake");
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.fire("timer"), timeoutMs);
      this.resolve = (reason) => {
        clearTimeout(timer);
        resolve(reason);
      };
    });
  }
}

export interface WaitOptions {
  waitMs: number;
  /** Re-read this often even without a wake-up, in case one was lost in flight. */
  recheckMs: number;
  /** Aborted when the client disconnects. */
  signal: AbortSignal;
}

/** Tracks every waiting recv of this node, so that shutdown can answer them all at once. */
export class WaitingRecvs {
  private readonly waiters = new Set<Waiter>();
  private draining = false;

  constructor(private readonly store: RoomStore) {}

  get size(): number {
    return this.waiters.size;
  }

  /** Shutdown: every waiting recv answers now with an empty list; new ones do not wait. */
  drain(): void {
    this.draining = true;
    for (const waiter of this.waiters) waiter.fire("drained");
  }

  /** The caller's pending messages, or undefined when the client went away. */
  async waitForMessages(seat: SeatCredentials, options: WaitOptions): Promise<InboxSnapshot | undefined> {
    // A recv that finds messages costs one script call and no subscription traffic.
    const first = await this.store.readInbox(seat, true);
    if (first.messages.length > 0 || options.waitMs === 0 || this.draining) return first;
    const deadline = Date.now() + options.waitMs;
    let snapshot = first;
    const waiter = new Waiter(() => snapshot.seat);
    // Listen, then read again: a send that landed between the first read and the
    // subscription is seen by this read, and any later one wakes the waiter. If the
    // subscription cannot be made (a cluster shard's subscriber being replaced, say), the
    // recv still waits, re-reading every second instead of failing.
    let stopWatching = () => {};
    let recheckMs = options.recheckMs;
    try {
      stopWatching = await this.store.wakeups.watch(seat.code, waiter.onEvent);
    } catch {
      recheckMs = Math.min(recheckMs, UNSUBSCRIBED_RECHECK_MS);
    }
    const onAbort = () => waiter.fire("aborted");
    options.signal.addEventListener("abort", onAbort);
    this.waiters.add(waiter);
    try {
      if (options.signal.aborted) return undefined;
      snapshot = await this.store.readInbox(seat, false);
      for (;;) {
        if (snapshot.messages.length > 0) return snapshot;
        const remaining = deadline - Date.now();
        if (remaining <= 0) return snapshot;
        // Wake at the room's expiry too: the re-read then answers 404.
        const reason = await waiter.next(Math.min(remaining, recheckMs, Math.max(snapshot.expiresInMs, 0) + 5));
        if (reason === "aborted") return undefined;
        if (reason === "drained") return { ...snapshot, messages: [] };
        if (reason === "timer" && Date.now() >= deadline) return { ...snapshot, messages: [] };
        snapshot = await this.store.readInbox(seat, false);
      }
    } finally {
      this.waiters.delete(waiter);
      options.signal.removeEventListener("abort", onAbort);
      stopWatching();
    }
  }
}
