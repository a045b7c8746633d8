// The room rules, once: what both stores decide the same way. Pure functions, no clock and no
// I/O. The in-process store calls them; on Redis the same decisions run inside the Lua
// scripts where they must be atomic with the state they read (an id is minted, a mailbox
// checked, a key looked up in the same step as the write), and the scripts say so where
// they do. Whatever needs no atomicity (how an ending reads, what an empty field means) is
// decided here for both, on the values the scripts return.
import {
  MAX_PENDING_BYTES,
  MAX_PENDING_MESSAGES,
  PEER_ACTIVE_WINDOW_MS,
  type EndReason,
  type RoomEnding,
  type Seat,
} from "@duet/protocol";

export const peerOf = (seat: Seat): Seat => (seat === "a" ? "b" : "a");

/**
 * The next message id (docs/protocol.md §2): the microseconds since the room opened, or one
 * more than the last id when that is larger. Ids grow, and an id lost with the store's
 * latest writes is never minted again for another text (send-8.lua does the same).
 */
export const nextMessageId = (lastId: number, sinceOpenUs: number): number => Math.max(lastId + 1, sinceOpenUs);

/** The mailbox, room-wide and both directions together (§8), refuses a text that would pass either limit. */
export const mailboxRefuses = (pending: { messages: number; bytes: number }, textBytes: number): boolean =>
  pending.messages >= MAX_PENDING_MESSAGES || pending.bytes + textBytes > MAX_PENDING_BYTES;

/** Where an idempotency key is remembered: scoped to the sender's seat (§7). */
export const idempotencyField = (seat: Seat, key: string): string => `${seat}:${key}`;

/** What a send with an idempotency key does, given the send that first used the key (§7). */
export type KeyDecision = { kind: "new" } | { kind: "replay"; id: string } | { kind: "conflict" };

export function decideKey(earlier: { id: string; digest: string } | undefined, digest: string): KeyDecision {
  if (!earlier) return { kind: "new" };
  return earlier.digest === digest ? { kind: "replay", id: earlier.id } : { kind: "conflict" };
}

/** A seat is active while its last authenticated call is less than the window old (§5.5). */
export const isActive = (lastSeenMs: number | undefined, nowMs: number): boolean =>
  lastSeenMs !== undefined && nowMs - lastSeenMs < PEER_ACTIVE_WINDOW_MS;

/** The claimed seats: seat a always, b once joined. */
export const membersOf = (peerJoined: boolean): Seat[] => (peerJoined ? ["a", "b"] : ["a"]);

/** A close without force is refused while any message is unacked, in either direction (§5.3). */
export const closeRefused = (left: { a: number; b: number }, force: boolean): boolean => !force && left.a + left.b > 0;

/** How a close ends a room: closed, or force_closed when unacked messages were left (§16). */
export const closeReason = (left: { a: number; b: number }): EndReason =>
  left.a + left.b > 0 ? "force_closed" : "closed";

/** How an expiry ends a room: its own expiry is the hard deadline only at the cap (§16). */
export const expiryReason = (endedAtMs: number, hardDeadlineMs: number): EndReason =>
  endedAtMs >= hardDeadlineMs ? "hard_cap" : "idle_timeout";

/** What a store keeps of a room's end: enough to tell either seat how it ended. */
export interface EndingRecord {
  reason: EndReason;
  /** The seat that closed it (closed and force_closed). */
  by?: Seat;
  atMs: number;
  /** Unacked messages a forced close abandoned, by the seat they were addressed to. */
  left?: { a: number; b: number };
}

/** The ending as one of the room's seats reads it: the 404's `ended` (§16). */
export function endingFor(record: EndingRecord, seat: Seat): RoomEnding {
  const ended: RoomEnding = { reason: record.reason, at: new Date(record.atMs).toISOString() };
  if (record.by) ended.by = record.by;
  if (record.reason === "force_closed" && record.left)
    ended.abandoned = { in: record.left[seat], out: record.left[peerOf(seat)] };
  return ended;
}

/**
 * "Empty means none": an optional string travels to a script as "" when absent (Lua has no
 * nil in ARGV), and a script's "" or nil (a missing hash field) reads back as absent.
 */
export const noneAsEmpty = (value: string | undefined): string => value ?? "";
export const emptyAsNone = (value: unknown): string | undefined =>
  value === undefined || value === null || value === "" ? undefined : String(value);
