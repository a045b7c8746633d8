// The waiters' timer slots: one TimerWheel per app (createApp makes it and hands it to the
// long-polls and the streams), so each app's timers are its own and a test can count them.
import type { Waiter } from "./waiter.js";

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

export class TimerWheel {
  private readonly slots = new Map<number, Slot>();

  /** Timer slots pending (for tests). */
  get size(): number {
    return this.slots.size;
  }

  private readonly fireSlot = (at: number): void => {
    const slot = this.slots.get(at);
    if (!slot) return;
    // A Timeout counts from the event loop's time when it was set, which lags Date.now() by
    // however long that turn of the loop had run: it can come early. Early, it waits on, or
    // each of its recvs would re-read Redis once more before its deadline.
    const early = at - Date.now();
    if (early > 0) {
      slot.timer = setTimeout(this.fireSlot, early + 1, at);
      slot.timer.unref();
      return;
    }
    this.slots.delete(at);
    for (const waiter of slot.waiters) waiter.timerFired(at);
  };

  /** Puts the waiter in the slot timeoutMs from now; returns the slot (its time). */
  schedule(waiter: Waiter, timeoutMs: number): number {
    const now = Date.now();
    const at = Math.ceil((now + Math.max(timeoutMs, 0)) / SLOT_MS) * SLOT_MS;
    let slot = this.slots.get(at);
    if (!slot) {
      slot = { timer: setTimeout(this.fireSlot, at - now + 1, at), waiters: new Set() };
      // The requests that wait keep the process alive; their timers need not.
      slot.timer.unref();
      this.slots.set(at, slot);
    }
    slot.waiters.add(waiter);
    return at;
  }

  unschedule(waiter: Waiter, at: number): void {
    const slot = this.slots.get(at);
    if (!slot?.waiters.delete(waiter) || slot.waiters.size > 0) return;
    clearTimeout(slot.timer);
    this.slots.delete(at);
  }
}
