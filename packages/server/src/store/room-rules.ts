// The room rules that need no atomicity, for the store to read the scripts' answers by. Every
// rule that decides on state and must hold against a concurrent call (an id is minted, a
// mailbox checked, an idempotency key looked up, a close refused while mail is unread) is
// in the Lua scripts (store/redis/lua), which both stores run. What is here reads their
// answers: how an ending reads, whether a seat is active, what an empty field means.
import { PEER_ACTIVE_WINDOW_MS, type EndReason, type RoomEnding, type Seat } from "@duet/protocol";

export const peerOf = (seat: Seat): Seat => (seat === "a" ? "b" : "a");

/** A seat is active while its last authenticated call is less than the window old (§5.5). */
export const isActive = (lastSeenMs: number | undefined, nowMs: number): boolean =>
  lastSeenMs !== undefined && nowMs - lastSeenMs < PEER_ACTIVE_WINDOW_MS;

/** The claimed seats: seat a always, b once joined. */
export const membersOf = (peerJoined: boolean): Seat[] => (peerJoined ? ["a", "b"] : ["a"]);

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
