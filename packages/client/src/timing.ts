// Waiting with cancellation: sleeps that an AbortSignal cuts short, and the total-time
// budget that every retrying flow of the SDK runs under.
import { setTimeout as delay } from "node:timers/promises";
import { DuetAbortError, DuetTimeoutError } from "./errors.js";

/** Resolves after `ms`, or rejects with DuetAbortError as soon as `signal` fires. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await delay(Math.max(0, ms), undefined, { signal });
  } catch (error) {
    // node:timers/promises rejects with its AbortError; callers catch the SDK's.
    if (signal?.aborted) throw new DuetAbortError(undefined, error);
    throw error;
  }
}

/** A total-time budget: how much is left, and an error naming what ran out of time. */
export class Deadline {
  private readonly endsAt: number;

  constructor(
    readonly budgetMs: number,
    private readonly what: string,
    private readonly now: () => number = Date.now,
  ) {
    this.endsAt = now() + budgetMs;
  }

  remainingMs(): number {
    return Math.max(0, this.endsAt - this.now());
  }

  expired(): boolean {
    return this.remainingMs() <= 0;
  }

  error(cause?: unknown): DuetTimeoutError {
    return new DuetTimeoutError(`${this.what} did not finish within ${this.budgetMs} ms.`, cause);
  }

  /**
   * Sleeps `ms`, unless the budget cannot cover it: then throws `lastFailure` (the refusal
   * or network error that made us wait, which says more than "out of time") or, without
   * one, the timeout error.
   */
  async sleepWithin(ms: number, signal?: AbortSignal, lastFailure?: Error): Promise<void> {
    if (ms > this.remainingMs()) throw lastFailure ?? this.error();
    await sleep(ms, signal);
  }
}

/** Exponential backoff with full jitter: attempt 0 waits up to `baseMs`, capped at `maxMs`. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** attempt);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
