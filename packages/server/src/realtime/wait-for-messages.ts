// Long-polls: recv answers at once when something is pending, otherwise waits for a wake-up,
// the room's end (404), or the wait running out (empty list); a waiting status answers
// when the peer's seat is claimed, the room ends or the wait runs out. Shared by both stores.
import type { InboxSnapshot, RoomStatus, RoomStore, SeatCredentials, WakeEvent } from "../store/room-store.js";

export type WakeReason = "wake" | "timer" | "aborted" | "drained";

/** How often a recv re-reads when it could not subscribe to wake-ups. */
const UNSUBSCRIBED_RECHECK_MS = 1000;

/**
 * Tells a waiting call that its client went away. An AbortSignal is one; so is ClientGone,
 * which HTTP routes use because a waiting request holds it for the whole wait.
 */
export interface GoneSignal {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: () => void): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/**
 * The client of a waiting request went away: what an AbortController does here, without
 * an EventTarget and its two Maps (about 0.6 KB of heap per waiting request). Its listener
 * runs at once, in abort().
 */
export class ClientGone implements GoneSignal {
  aborted = false;
  private listeners?: (() => void) | Array<() => void>;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = undefined;
    if (typeof listeners === "function") listeners();
    else if (listeners) for (const listener of listeners) listener();
  }

  addEventListener(_type: "abort", listener: () => void): void {
    if (this.aborted) return;
    if (!this.listeners) this.listeners = listener;
    else if (typeof this.listeners === "function") this.listeners = [this.listeners, listener];
    else this.listeners.push(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    if (this.listeners === listener) this.listeners = undefined;
    else if (Array.isArray(this.listeners)) this.listeners = this.listeners.filter((l) => l !== listener);
  }
}

// The waiters' timers (a recv's wait, the re-check, a room's expiry) share one Timeout per
// 100 ms slot of the node instead of one Timeout each: every waiter's duration differs (the
// re-check is jittered, a wait counts from its request's arrival), and Node keeps a timer
// list per distinct duration, so one Timeout each also meant one list each. A waiter's
// timer fires at most one slot late, never early.
const SLOT_MS = 100;
interface Slot {
  timer: NodeJS.Timeout;
  waiters: Set<Waiter>;
}
const slots = new Map<number, Slot>();

function fireSlot(at: number): void {
  const slot = slots.get(at);
  if (!slot) return;
  // A Timeout counts from the event loop's time when it was set, which lags Date.now() by
  // however long that turn of the loop had run: it can come early. Early, it waits on, or
  // each of its recvs would re-read Redis once more before its deadline.
  const early = at - Date.now();
  if (early > 0) {
    slot.timer = setTimeout(fireSlot, early + 1, at);
    slot.timer.unref();
    return;
  }
  slots.delete(at);
  for (const waiter of slot.waiters) waiter.timerFired(at);
}

function schedule(waiter: Waiter, timeoutMs: number): number {
  const now = Date.now();
  const at = Math.ceil((now + Math.max(timeoutMs, 0)) / SLOT_MS) * SLOT_MS;
  let slot = slots.get(at);
  if (!slot) {
    slot = { timer: setTimeout(fireSlot, at - now + 1, at), waiters: new Set() };
    // The requests that wait keep the process alive; their timers need not.
    slot.timer.unref();
    slots.set(at, slot);
  }
  slot.waiters.add(waiter);
  return at;
}

function unschedule(waiter: Waiter, at: number): void {
  const slot = slots.get(at);
  if (!slot?.waiters.delete(waiter) || slot.waiters.size > 0) return;
  clearTimeout(slot.timer);
  slots.delete(at);
}

/** Timer slots pending in this process (for tests). */
export const pendingTimerSlots = (): number => slots.size;

/**
 * One waiting call: collects wake-ups so none is lost between a read and the next wait.
 * concern: the wake-up event that matters to the call (its own seat's inbox, "joined"), or
 * undefined while every one may ("closed" and "resync" always do).
 */
export class Waiter {
  private pendingWake = false;
  private pendingFinal?: WakeReason;
  private resolve?: (reason: WakeReason) => void;
  /** The timer slot of the current wait (see schedule). */
  private slot?: number;

  constructor(public concern?: WakeEvent) {}

  onEvent = (event: WakeEvent): void => {
    if (event === "closed" || event === "resync" || this.concern === undefined || event === this.concern)
      this.fire("wake");
  };

  /** Listener for a GoneSignal: the client went away. */
  onGone = (): void => this.fire("aborted");

  fire(reason: WakeReason): void {
    const resolve = this.resolve;
    if (resolve) {
      this.resolve = undefined;
      if (this.slot !== undefined) unschedule(this, this.slot);
      this.slot = undefined;
      resolve(reason);
    } else if (reason === "wake") {
      this.pendingWake = true;
    } else if (reason !== "timer") {
      this.pendingFinal = reason;
    }
  }

  /** Called by the slot this waiter's timer is in. */
  timerFired(at: number): void {
    if (this.slot !== at) return;
    this.slot = undefined;
    this.fire("timer");
  }

  next(timeoutMs: number): Promise<WakeReason> {
    if (this.pendingFinal) return Promise.resolve(this.pendingFinal);
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve("wake");
    }
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.slot = schedule(this, timeoutMs);
    });
  }
}

export interface WaitOptions {
  waitMs: number;
  /** Re-read this often even without a wake-up, in case one was lost in flight. */
  recheckMs: number;
  /** Aborted when the client disconnects. */
  signal: GoneSignal;
}

/** What a long-poll reads, and when its answer is ready (one object per kind, shared by every call). */
interface LongPoll<T extends { expiresInMs: number }> {
  /** One read; touch says whether it counts as activity. */
  read(store: RoomStore, seat: SeatCredentials, touch: boolean): Promise<T>;
  ready(snapshot: T): boolean;
  /** The wake-up that concerns this wait after a read (undefined: every one). */
  concern(snapshot: T): WakeEvent | undefined;
}

const MESSAGES: LongPoll<InboxSnapshot> = {
  read: (store, seat, touch) => store.readInbox(seat, touch),
  ready: (snapshot) => snapshot.messages.length > 0,
  // Wake-ups for the other seat's inbox are not ours (until a read tells our seat, every one counts).
  concern: (snapshot) => snapshot.seat,
};

const PEER: LongPoll<RoomStatus> = {
  read: (store, seat, touch) => store.getStatus(seat, touch),
  ready: (status) => status.peerJoined,
  concern: () => "joined",
};

/** Tracks every waiting recv and status of this node, so that shutdown can answer them all at once. */
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
  waitForMessages(seat: SeatCredentials, options: WaitOptions): Promise<InboxSnapshot | undefined> {
    return this.longPoll(seat, options, MESSAGES, undefined);
  }

  /**
   * The caller's room status once the peer's seat is claimed, or when the wait runs out;
   * undefined when the client went away. The room's end rejects with its 404.
   */
  waitForPeer(seat: SeatCredentials, options: WaitOptions): Promise<RoomStatus | undefined> {
    return this.longPoll(seat, options, PEER, "joined");
  }

  private async longPoll<T extends { expiresInMs: number }>(
    seat: SeatCredentials,
    options: WaitOptions,
    poll: LongPoll<T>,
    concern: WakeEvent | undefined,
  ): Promise<T | undefined> {
    // The wait counts from the request's arrival, whatever the reads before it cost.
    const deadline = Date.now() + options.waitMs;
    const mayWait = options.waitMs > 0 && !this.draining;
    // Wake-ups for this room already reach this node (another waiter, or a recent one):
    // listen first, and one read covers everything.
    if (mayWait && this.store.wakeups.isListening(seat.code))
      return this.listenAndWait(seat, deadline, options, poll, new Waiter(concern));
    // Otherwise a call that is answered at once costs one script call and no subscription.
    const first = await poll.read(this.store, seat, true);
    if (poll.ready(first) || !mayWait) return first;
    return this.listenAndWait(seat, deadline, options, poll, new Waiter(poll.concern(first)), first);
  }

  /**
   * Listens for the room's wake-ups, then reads: a send that landed before the listening
   * began is seen by this read, and any later one wakes the waiter.
   */
  private async listenAndWait<T extends { expiresInMs: number }>(
    seat: SeatCredentials,
    deadline: number,
    options: WaitOptions,
    poll: LongPoll<T>,
    waiter: Waiter,
    earlier?: T,
  ): Promise<T | undefined> {
    const { signal } = options;
    signal.addEventListener("abort", waiter.onGone);
    // Registered before anything can stall, so that shutdown reaches this recv too.
    this.waiters.add(waiter);
    if (this.draining) waiter.fire("drained");
    let stopWatching: (() => void) | undefined;
    let recheckMs = options.recheckMs;
    try {
      // A subscription that fails, or is not confirmed in time (the bus bounds that wait:
      // a cluster shard's subscriber being replaced, say), does not fail the recv: it
      // re-reads every second instead.
      try {
        stopWatching = await this.store.wakeups.watch(seat.code, waiter.onEvent);
      } catch {
        recheckMs = Math.min(recheckMs, UNSUBSCRIBED_RECHECK_MS);
      }
      if (signal.aborted) return undefined;
      // Only the first read counts as activity.
      let current = await poll.read(this.store, seat, earlier === undefined);
      waiter.concern = poll.concern(current);
      for (;;) {
        if (poll.ready(current)) return current;
        const remaining = deadline - Date.now();
        if (remaining <= 0) return current;
        // Wake at the room's expiry too: the re-read then answers 404.
        // The re-check is jittered so that recvs that arrived together do not re-read together.
        const recheck = recheckMs * (0.8 + Math.random() * 0.4);
        const reason = await waiter.next(Math.min(remaining, recheck, Math.max(current.expiresInMs, 0) + 5));
        if (reason === "aborted") return undefined;
        if (reason === "drained" || (reason === "timer" && Date.now() >= deadline)) return current;
        current = await poll.read(this.store, seat, false);
        waiter.concern = poll.concern(current);
      }
    } finally {
      this.waiters.delete(waiter);
      signal.removeEventListener("abort", waiter.onGone);
      stopWatching?.();
    }
  }
}
