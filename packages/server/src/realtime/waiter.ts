// One waiting call's state: the wake-ups it collected, its timer, and what ended its wait.
import type { Seat } from "@duet/protocol";
import { isReadEvent, type WakeEvent } from "../store/room-store.js";
import type { TimerWheel } from "./timer-wheel.js";

/** replaced: a newer waiting call of the same seat took this one's place (long-polls.ts). */
export type WakeReason = "wake" | "timer" | "aborted" | "drained" | "replaced";

/**
 * The wake-ups a waiting call is concerned with: mail for a seat, "joined", or read
 * receipts ("read:" any seat's, "read:a" / "read:b" that seat's messages).
 */
export type Concern = Seat | "joined" | "read:" | `read:${Seat}`;

/** Orders wake-ups and reads: a read that began after a waiter was woken sees what woke it. */
let sequence = 0;
export const nextSequence = (): number => ++sequence;

/**
 * One waiting call: collects wake-ups so none is lost between a read and the next wait.
 * concern: the wake-up event that matters to the call (its own seat's inbox, "joined", a
 * read receipt), or undefined while any mail or join may ("closed" and "resync" always do).
 * A read receipt wakes only a call concerned with receipts: it never makes a recv ready.
 */
export class Waiter {
  private pendingWake = false;
  private pendingFinal?: WakeReason;
  private resolve?: (reason: WakeReason) => void;
  /** The timer slot of the current wait (see TimerWheel.schedule). */
  private slot?: number;
  /** When (nextSequence) it was last woken: a read begun later sees what woke it (long-polls.ts). */
  firedAt = 0;

  constructor(
    private readonly wheel: TimerWheel,
    public concern?: Concern,
  ) {}

  onEvent = (event: WakeEvent): void => this.hear(event);

  /** A wake-up arrived: wake the call if it is concerned. */
  protected hear(event: WakeEvent): void {
    const concern = this.concern;
    if (event === "closed" || event === "resync") this.fire("wake");
    else if (isReadEvent(event)) {
      if (concern?.startsWith("read:") && event.startsWith(concern)) this.fire("wake");
    } else if (concern === undefined || event === concern) this.fire("wake");
  }

  /** Listener for a GoneSignal: the client went away. */
  onGone = (): void => this.fire("aborted");

  fire(reason: WakeReason): void {
    this.firedAt = nextSequence();
    const resolve = this.resolve;
    if (resolve) {
      this.resolve = undefined;
      if (this.slot !== undefined) this.wheel.unschedule(this, this.slot);
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
      this.slot = this.wheel.schedule(this, timeoutMs);
    });
  }
}
