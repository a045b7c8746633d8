// The waiter's pieces that replaced per-request objects: the one-listener ClientGone (for
// an AbortController) and the shared timer slots (for one Timeout per waiter). Order and
// bookkeeping only: no assertion on how long anything took.
import { ClientGone } from "../../src/realtime/client-gone";
import { TimerWheel } from "../../src/realtime/timer-wheel";
import { Waiter } from "../../src/realtime/waiter";

describe("ClientGone", () => {
  it("runs each listener once, in abort(), and not the removed ones", () => {
    const gone = new ClientGone();
    const calls: string[] = [];
    const first = () => calls.push("first");
    const second = () => calls.push("second");
    const removed = () => calls.push("removed");
    gone.addEventListener("abort", first);
    gone.addEventListener("abort", removed);
    gone.addEventListener("abort", second);
    gone.removeEventListener("abort", removed);
    expect(gone.aborted).toBe(false);
    gone.abort();
    gone.abort();
    expect(gone.aborted).toBe(true);
    expect(calls).toEqual(["first", "second"]);
  });

  it("does not keep a listener added after the abort", () => {
    const gone = new ClientGone();
    gone.abort();
    const listener = jest.fn();
    gone.addEventListener("abort", listener);
    expect(listener).not.toHaveBeenCalled();
  });
});

describe("Waiter", () => {
  const wheel = new TimerWheel();
  const pendingTimerSlots = () => wheel.size;
  it("answers 'timer' from its slot, and a slot nobody waits in any more is cleared", async () => {
    const slotsBefore = pendingTimerSlots();
    const timed = new Waiter(wheel);
    const reason = timed.next(1);
    expect(pendingTimerSlots()).toBe(slotsBefore + 1);
    await expect(reason).resolves.toBe("timer");
    expect(pendingTimerSlots()).toBe(slotsBefore);

    // Woken before its timer: the timer's slot goes with it.
    const woken = new Waiter(wheel);
    const waiting = woken.next(60_000);
    expect(pendingTimerSlots()).toBe(slotsBefore + 1);
    woken.onEvent("resync");
    await expect(waiting).resolves.toBe("wake");
    expect(pendingTimerSlots()).toBe(slotsBefore);
  });

  it("keeps a wake-up that came between two waits, and only the events it is concerned with", async () => {
    const waiter = new Waiter(wheel, "a");
    waiter.onEvent("b");
    waiter.onEvent("joined");
    const quiet = waiter.next(60_000);
    waiter.onEvent("a");
    await expect(quiet).resolves.toBe("wake");
    waiter.onEvent("closed");
    await expect(waiter.next(60_000)).resolves.toBe("wake");
    waiter.fire("aborted");
    await expect(waiter.next(60_000)).resolves.toBe("aborted");
    expect(pendingTimerSlots()).toBe(0);
  });

  it("waits for every event while it has no concern yet; slots go when their waiters do", async () => {
    const one = new Waiter(wheel);
    const two = new Waiter(wheel);
    const first = one.next(60_000);
    const second = two.next(60_000);
    expect(pendingTimerSlots()).toBeLessThanOrEqual(2);
    one.onEvent("b");
    two.fire("drained");
    await expect(first).resolves.toBe("wake");
    await expect(second).resolves.toBe("drained");
    expect(pendingTimerSlots()).toBe(0);
  });

  it("read receipts wake only waits concerned with them: its own seat's, or any seat's before a read told the seat", async () => {
    const untilRead = new Waiter(wheel, "read:a");
    for (const event of ["read:b:5", "a", "b", "joined"] as const) untilRead.onEvent(event);
    // Not woken by any of them: its wait runs out.
    await expect(untilRead.next(1)).resolves.toBe("timer");
    const woken = untilRead.next(60_000);
    untilRead.onEvent("read:a:3,4");
    await expect(woken).resolves.toBe("wake");

    const anySeat = new Waiter(wheel, "read:");
    const waiting = anySeat.next(60_000);
    anySeat.onEvent("read:b:9");
    await expect(waiting).resolves.toBe("wake");

    // A recv that does not know its seat yet wakes on any mail, never on a receipt.
    const recv = new Waiter(wheel);
    recv.onEvent("read:a:1");
    recv.onEvent("read:b:2");
    await expect(recv.next(1)).resolves.toBe("timer");
    const mail = recv.next(60_000);
    recv.onEvent("b");
    await expect(mail).resolves.toBe("wake");
    expect(pendingTimerSlots()).toBe(0);
  });
});
