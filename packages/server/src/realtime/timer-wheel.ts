// The waiters' timer slots.
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

export function schedule(waiter: Waiter, timeoutMs: number): number {
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

export function unschedule(waiter: Waiter, at: number): void {
  const slot = slots.get(at);
  if (!slot?.waiters.delete(waiter) || slot.waiters.size > 0) return;
  clearTimeout(slot.timer);
  slots.delete(at);
}

/** Timer slots pending in this process (for tests). */
export const pendingTimerSlots = (): number => slots.size;
