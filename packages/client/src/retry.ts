// The retry engine: which failures a call tries again, after how long, within which total
// budget, and how a send waits for room in a full mailbox. Pure policy over an `attempt`
// function: it never makes a request itself.
import { MAX_PENDING_MESSAGES } from "@duet/protocol";
import { DuetAbortError, DuetError } from "./errors.js";
import type { CallOptions } from "./options.js";
import { Deadline, backoffMs } from "./timing.js";

/** "refusals": only refusals that mean "not now" (a network failure may have landed); "refusals-and-network": also network errors (the call is safe to repeat). */
export type RetryKind = "refusals" | "refusals-and-network";

export interface RetryPolicy {
  /** Longest wait for one HTTP answer. */
  requestTimeoutMs: number;
  /** Default total budget of a call. */
  retryTimeoutMs: number;
  now: () => number;
}

/** A failure before any answer, or a relay that is briefly unavailable: worth another try. */
export function isTransient(error: DuetError): boolean {
  return error.code === "network" || error.code === "timeout" || error.code === "unavailable";
}

/**
 * Runs `attempt` until it succeeds, the budget runs out or the caller aborts. Refusals
 * that mean "not now" (429 rate_limited and too_many_waiters, 503) are always retried: the
 * relay did nothing.
 * Network errors only for calls that are safe to repeat. `onMailboxFull` decides how a
 * send waits for room in the mailbox.
 */
export async function retrying<T>(
  policy: RetryPolicy,
  what: string,
  kind: RetryKind,
  options: CallOptions,
  attempt: (requestTimeoutMs: number, attemptNumber: number) => Promise<T>,
  onMailboxFull?: (deadline: Deadline, refusal: DuetError) => Promise<void>,
): Promise<T> {
  const deadline = new Deadline(options.timeoutMs ?? policy.retryTimeoutMs, what, policy.now);
  let failures = 0;
  for (let attemptNumber = 0; ; attemptNumber++) {
    if (options.signal?.aborted) throw new DuetAbortError();
    try {
      return await attempt(Math.max(1, Math.min(policy.requestTimeoutMs, deadline.remainingMs())), attemptNumber);
    } catch (error) {
      if (!(error instanceof DuetError)) throw error;
      // too_many_waiters: this address holds its share of the node's waiting calls; one of
      // them ends within its wait, so the same wait after Retry-After.
      if (error.code === "rate_limited" || error.code === "too_many_waiters") {
        const delayMs = (error.retryAfterSeconds ?? 1) * 1000;
        options.onWait?.({ reason: "rate_limited", delayMs, attempt: attemptNumber });
        await deadline.sleepWithin(delayMs, options.signal, error);
      } else if (error.code === "mailbox_full" && onMailboxFull) {
        await onMailboxFull(deadline, error);
      } else if (isTransient(error) && (kind === "refusals-and-network" || error.code === "unavailable")) {
        const delayMs =
          error.retryAfterSeconds !== undefined ? error.retryAfterSeconds * 1000 : backoffMs(failures++, 250, 4000);
        options.onWait?.({
          reason: error.code === "unavailable" ? "unavailable" : "network",
          delayMs,
          attempt: attemptNumber,
        });
        await deadline.sleepWithin(delayMs, options.signal, error);
      } else {
        throw error;
      }
    }
  }
}

/** What a send remembers between mailbox_full refusals. */
export interface MailboxWatch {
  pendingAtLastRetry?: number;
}

/**
 * After 429 mailbox_full: polls `pendingNow` (the room's unacked messages, from status)
 * until the room holds fewer, so the retry has a chance. The mailbox can also be full by
 * bytes with fewer than 8 messages; then the first retry goes at once and later ones wait
 * for the count to drop.
 */
export async function waitForMailboxSpace(
  pendingNow: () => Promise<number>,
  deadline: Deadline,
  refusal: DuetError,
  watch: MailboxWatch,
  options: CallOptions,
): Promise<void> {
  // A look at the mailbox that outlasts the budget ends the send with the refusal it was
  // waiting out, as a sleep past the budget does: the caller learns the mailbox is full, not
  // that a status call it never made timed out.
  const look = () =>
    pendingNow().catch((error: unknown) => {
      throw error instanceof DuetError && error.code === "timeout" ? refusal : error;
    });
  let pending = await look();
  if (pending < MAX_PENDING_MESSAGES && pending !== watch.pendingAtLastRetry) {
    watch.pendingAtLastRetry = pending;
    return;
  }
  const threshold = Math.min(pending, MAX_PENDING_MESSAGES);
  for (let poll = 0; pending >= threshold; poll++) {
    const delayMs = backoffMs(poll, 500, 2000);
    options.onWait?.({ reason: "mailbox_full", delayMs, attempt: poll });
    await deadline.sleepWithin(delayMs, options.signal, refusal);
    pending = await look();
  }
  watch.pendingAtLastRetry = pending;
}
