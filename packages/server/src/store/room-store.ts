// The store interface. The HTTP layer talks only to this; one implementation
// (scripted-store.ts) runs the room scripts on Redis or, without it, in process, and passes
// one behaviour suite on both. Every call with a seat token on a room that ended less than
// endingKeepMs ago throws a 404 that says how it ended (roomEndedError); any other call on a
// gone room throws a bare 404.
import type { Message, Seat } from "@duet/protocol";

/** What a seat's holder proves it is: the SHA-256 of its token, never the token. */
export interface SeatCredentials {
  code: string;
  tokenHash: string;
}

export interface SeatGrant {
  code: string;
  seat: Seat;
  /** The only place a token exists in clear: handed once to the caller, stored hashed. */
  token: string;
  expiresInMs: number;
  /** The room is end-to-end encrypted (opened with e2e: true). */
  e2e: boolean;
}

export interface InboxSnapshot {
  seat: Seat;
  messages: Message[];
  expiresInMs: number;
}

export interface RoomStatus {
  seat: Seat;
  members: Seat[];
  expiresInMs: number;
  peerJoined: boolean;
  peerActive: boolean;
  pendingIn: number;
  /** Ids of the caller's sent messages the peer has not acked (read) yet, oldest first. */
  unread: string[];
  e2e: boolean;
}

export interface SendInput extends SeatCredentials {
  text: string;
  idempotencyKey?: string;
  /** Digest of text, present with idempotencyKey: a reused key is compared by it. */
  textDigest?: string;
  /** The text has the shape of an e2e envelope; an encrypted room refuses any other (400 e2e_required). */
  envelope: boolean;
}

/**
 * A wake-up: the seat that has new mail ("a" or "b"), "joined" when seat b was claimed,
 * "closed" when the room ended, "resync" when wake-ups may have been missed (every waiter
 * re-reads), or a read receipt (ReadEvent).
 */
export type WakeEvent = Seat | "joined" | "closed" | "resync" | ReadEvent;

/**
 * A read receipt: the peer acked these messages of the seat, "read:<seat>:<id>,<id>". The
 * ack that deleted them publishes it, in the same atomic step, naming only ids it deleted.
 */
export type ReadEvent = `read:${Seat}:${string}`;

export const readEvent = (seat: Seat, ids: readonly string[]): ReadEvent => `read:${seat}:${ids.join(",")}`;

export const isReadEvent = (event: WakeEvent): event is ReadEvent => event.startsWith("read:");

/** The ids a read event names, when it is about the seat's messages. */
export const readIdsFor = (event: ReadEvent, seat: Seat): string[] | undefined =>
  event.charCodeAt(5) === seat.charCodeAt(0) ? event.slice(7).split(",") : undefined;

export interface WakeupBus {
  /**
   * Calls listener on every wake-up for the room. Resolves once wake-ups are flowing (on
   * Redis: the subscription is confirmed), so a check made after it cannot miss a send.
   * Returns the function that stops listening.
   */
  watch(code: string, listener: (event: WakeEvent) => void): Promise<() => void>;
  /** True when wake-ups for the room already reach this node (watch would cost nothing). */
  isListening(code: string): boolean;
  /** The store is closing: no command is sent any more (a lingering channel's unsubscribe). */
  close?(): void;
}

export interface RoomStore {
  readonly kind: "memory" | "redis";
  readonly wakeups: WakeupBus;
  /**
   * `owner` is the opener's client address: with a per-address budget (roomsPerOwner), an
   * address that holds that many live rooms is refused 429 too_many_rooms.
   */
  openRoom(options?: { e2e?: boolean; owner?: string }): Promise<SeatGrant>;
  joinRoom(code: string): Promise<SeatGrant>;
  /** replayed: the idempotency key was seen before with this text; nothing new was stored. */
  sendMessage(input: SendInput): Promise<{ id: string; replayed: boolean }>;
  /** Pending messages for the caller; touch=false re-reads without counting as activity. */
  readInbox(seat: SeatCredentials, touch: boolean): Promise<InboxSnapshot>;
  /** Deletes the caller's listed messages; when any was deleted, wakes the sender's waiters with a ReadEvent. */
  ackMessages(seat: SeatCredentials, ids: string[]): Promise<{ acked: number }>;
  /** The room as the caller sees it; touch=false re-reads without counting as activity. */
  getStatus(seat: SeatCredentials, touch?: boolean): Promise<RoomStatus>;
  closeRoom(seat: SeatCredentials, force: boolean): Promise<void>;
  getStats(): Promise<StoreTally>;
  /** What anyone with the code may know of a room (the join page): undefined when there is none. No activity. */
  describeRoom(code: string): Promise<{ e2e: boolean } | undefined>;
  /**
   * A short note under `key` for `ttlMs` (the MCP self-test's probes: whichever node holds a
   * probe writes how it ended, and whichever node the next call lands on reads it).
   */
  putNote(key: string, note: string, ttlMs: number): Promise<void>;
  /** The note under `key`, undefined when there is none (never written, or expired). */
  readNote(key: string): Promise<string | undefined>;
  /** True when the store answers (readiness). */
  isReady(): Promise<boolean>;
  /** Releases connections and timers. */
  close(): Promise<void>;
}

/** Totals since the store was created, and rooms open right now. */
export interface StoreTally {
  sessions: number;
  paired: number;
  messages: number;
  bytes: number;
  closed: number;
  roomsOpen: number;
}

/** What one client address, and the in-process store as a whole, may hold. */
export interface StoreBudget {
  /** Live rooms one owner may hold open at once; 0 or absent: no limit. */
  roomsPerOwner?: number;
  /** In-process store only: bytes of rooms, unacked text and idempotency keys in all. */
  maxBytes?: number;
}

export interface RoomLifetimes {
  idleMs: number;
  maxMs: number;
  /**
   * How long after a room ends its seats still learn how it ended (a 404 with `ended`);
   * the code cannot be minted again meanwhile. 0: a bare 404 at once. Default ROOM_ENDING_KEEP_SECONDS's.
   */
  endingKeepMs?: number;
}
