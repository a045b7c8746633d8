// What the scripts' refusals and Redis's failures mean to a client: one catalogue answer
// each. A refusal is a script's negative status (lua/includes/refusals.lua); a failure is
// a connection lost, a deadline passed or a transient reply, all of them 503.
import { ReplyError } from "ioredis";
import { ApiError, apiError } from "../../errors.js";

/**
 * The scripts' refusals (lua/includes/refusals.lua), one meaning each, and the catalogue's
 * answers to them (refused). A room call's GONE becomes the 404 with how the room ended
 * (goneError); CODE_IN_USE makes open mint another code.
 */
export const Refusal = {
  gone: -1,
  wrongToken: -2,
  codeInUse: -3,
  full: -4,
  keyConflict: -5,
  mailboxFull: -6,
  notAnEnvelope: -7,
  unread: -8,
  tooManyRooms: -9,
} as const;

const REFUSED: Record<number, () => ApiError> = {
  [Refusal.gone]: () => apiError("not_found"),
  [Refusal.wrongToken]: () => apiError("unauthorized", "This token does not hold a seat in this room."),
  [Refusal.full]: () => apiError("full"),
  [Refusal.keyConflict]: () => apiError("idempotency_conflict"),
  [Refusal.mailboxFull]: () => apiError("mailbox_full"),
  [Refusal.notAnEnvelope]: () => apiError("e2e_required"),
  [Refusal.unread]: () => apiError("unread"),
};

/** The error a refusal is answered with (the bare 404 for GONE). */
export function refused(status: number): Error {
  const make = REFUSED[status];
  return make ? make() : new Error(`unexpected script status ${status}`);
}

// Replies that mean "Redis cannot serve right now", as opposed to a bug in a script.
// OOM: with maxmemory-policy noeviction a full Redis refuses writes until rooms expire.
// UNBLOCKED: a master demoted while a WAIT was blocked on it (a failover under write-ack).
export const TRANSIENT_REPLY =
  /^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY|BUSY|NOREPLICAS|MOVED|ASK|OOM|UNBLOCKED)\b/;

/** What a full Redis is answered: the same 503 as an unreachable one, saying where to look. */
export const STORE_FULL_MESSAGE =
  "The relay's store is full (Redis maxmemory); rooms that end free space. Retry later.";

/**
 * Connection loss, timeouts and transient replies become 503; script bugs stay 500. An OOM
 * reply is the same 503 `unavailable` (clients retry as before) with its own message, and
 * marked storeFull so that the metrics tell it apart from an unreachable store.
 */
export function storeFailure(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  if (error instanceof ReplyError && !TRANSIENT_REPLY.test((error as Error).message)) return error;
  const full = error instanceof ReplyError && /^OOM\b/.test((error as Error).message);
  const unavailable = apiError("unavailable", full ? STORE_FULL_MESSAGE : undefined);
  unavailable.retryAfterSeconds = 1;
  if (full) unavailable.storeFull = true;
  return unavailable;
}
