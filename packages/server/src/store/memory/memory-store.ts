// The in-process store: the same behaviour as the Redis store, in one process's memory.
// Used when REDIS_URL is not set, so `pnpm start` works on a fresh machine.
import {
  MAX_PENDING_BYTES,
  MAX_PENDING_MESSAGES,
  PEER_ACTIVE_WINDOW_MS,
  type EndReason,
  type Message,
  type RoomEnding,
  type Seat,
} from "@duet/protocol";
import { apiError, roomEndedError, storeFullError, tooManyRoomsError } from "../../errors.js";
import { LocalWakeupBus } from "../../realtime/local-wakeups.js";
import { hashSeatToken, mintRoomCode, mintSeatToken, tokenHashesEqual } from "../credentials.js";
import {
  DEFAULT_ENDING_KEEP_MS,
  type InboxSnapshot,
  type RoomLifetimes,
  type RoomStatus,
  type RoomStore,
  type SeatCredentials,
  type SeatGrant,
  type SendInput,
  type StoreBudget,
  type StoreTally,
} from "../room-store.js";

interface StoredMessage {
  id: string;
  text: string;
  bytes: number;
}

interface Room {
  tokenHashes: { a: string; b?: string };
  hardDeadline: number;
  expiresAt: number;
  lastSeen: { a: number; b?: number };
  /** When the room opened (ms) and the last message id: ids are minted as the Redis store does. */
  bornAt: number;
  lastId: number;
  inbox: { a: StoredMessage[]; b: StoredMessage[] };
  pendingBytes: number;
  /** "<seat>:<key>" -> id and text digest of the send that first used the key. */
  idempotency: Map<string, { id: string; digest: string }>;
  /** What the idempotency entries weigh, in the store's budget. */
  idempotencyBytes: number;
  e2e: boolean;
  /** The opener's address, when its rooms are counted. */
  owner?: string;
}

// What the budget counts for a room and an ending besides their text: their fields, maps and
// token hashes, rounded up.
const ROOM_BYTES = 1024;
const ENDING_BYTES = 256;
const idempotencyEntryBytes = (key: string) => 2 * key.length + 96;

/** What is left of a room after it ended, for endingKeepMs: enough to tell its seats how. */
interface Ending {
  tokenHashes: { a: string; b?: string };
  reason: EndReason;
  by?: Seat;
  /** Unacked messages the close abandoned, by the seat they were addressed to. */
  left?: { a: number; b: number };
  at: number;
  keptUntil: number;
}

const peerOf = (seat: Seat): Seat => (seat === "a" ? "b" : "a");

export class MemoryRoomStore implements RoomStore {
  readonly kind = "memory" as const;
  readonly wakeups = new LocalWakeupBus();
  private readonly rooms = new Map<string, Room>();
  private readonly endings = new Map<string, Ending>();
  private readonly endingKeepMs: number;
  private readonly tally = { sessions: 0, paired: 0, messages: 0, bytes: 0, closed: 0 };
  private readonly sweeper: NodeJS.Timeout;
  /** Each owner's live rooms: code -> the room's hard deadline. */
  private readonly owners = new Map<string, Map<string, number>>();
  /** Bytes held, as the budget counts them. */
  private used = 0;
  private readonly roomsPerOwner: number;
  private readonly maxBytes: number;

  constructor(
    private readonly lifetimes: RoomLifetimes,
    private readonly now: () => number = Date.now,
    budget: StoreBudget = {},
  ) {
    this.roomsPerOwner = budget.roomsPerOwner ?? 0;
    this.maxBytes = budget.maxBytes ?? Number.POSITIVE_INFINITY;
    this.endingKeepMs = lifetimes.endingKeepMs ?? DEFAULT_ENDING_KEEP_MS;
    // Expired rooms are also dropped on access; the sweep only frees their memory.
    this.sweeper = setInterval(() => this.sweep(), 10_000);
    this.sweeper.unref();
  }

  private sweep(): void {
    for (const [code, room] of this.rooms) if (room.expiresAt <= this.now()) this.expireRoom(code, room);
    for (const [code, ending] of this.endings) {
      if (ending.keptUntil > this.now()) continue;
      this.endings.delete(code);
      this.used -= ENDING_BYTES;
    }
  }

  private endRoom(code: string, room: Room, ending: Omit<Ending, "tokenHashes" | "keptUntil">): void {
    this.rooms.delete(code);
    this.used -= ROOM_BYTES + room.pendingBytes + room.idempotencyBytes;
    const owned = room.owner === undefined ? undefined : this.owners.get(room.owner);
    if (owned?.delete(code) && owned.size === 0) this.owners.delete(room.owner!);
    if (this.endingKeepMs > 0) {
      this.endings.set(code, { ...ending, tokenHashes: room.tokenHashes, keptUntil: ending.at + this.endingKeepMs });
      this.used += ENDING_BYTES;
    }
    this.wakeups.publish(code, "closed");
  }

  /** The room's own expiry time tells idle from hard cap: it is the hard deadline only at the cap. */
  private expireRoom(code: string, room: Room): void {
    this.endRoom(code, room, {
      reason: room.expiresAt >= room.hardDeadline ? "hard_cap" : "idle_timeout",
      at: room.expiresAt,
    });
  }

  /** The room, or undefined when it is gone (expired ones are ended here). */
  private findRoom(code: string): Room | undefined {
    const room = this.rooms.get(code);
    if (room && room.expiresAt <= this.now()) {
      this.expireRoom(code, room);
      return undefined;
    }
    return room;
  }

  private liveRoom(code: string): Room {
    const room = this.findRoom(code);
    if (!room) throw apiError("not_found");
    return room;
  }

  /** 404 for a gone room: with how it ended when the token holds one of its seats. */
  private goneError(code: string, tokenHash: string): Error {
    const ending = this.endings.get(code);
    if (!ending || ending.keptUntil <= this.now()) return apiError("not_found");
    let seat: Seat | undefined;
    if (tokenHashesEqual(ending.tokenHashes.a, tokenHash)) seat = "a";
    else if (ending.tokenHashes.b !== undefined && tokenHashesEqual(ending.tokenHashes.b, tokenHash)) seat = "b";
    if (!seat) return apiError("not_found");
    const ended: RoomEnding = { reason: ending.reason, at: new Date(ending.at).toISOString() };
    if (ending.by) ended.by = ending.by;
    if (ending.left) ended.abandoned = { in: ending.left[seat], out: ending.left[peerOf(seat)] };
    return roomEndedError(ended, seat);
  }

  private authenticate({ code, tokenHash }: SeatCredentials): { room: Room; seat: Seat } {
    const room = this.findRoom(code);
    if (!room) throw this.goneError(code, tokenHash);
    if (tokenHashesEqual(room.tokenHashes.a, tokenHash)) return { room, seat: "a" };
    if (room.tokenHashes.b !== undefined && tokenHashesEqual(room.tokenHashes.b, tokenHash)) return { room, seat: "b" };
    throw apiError("unauthorized", "This token does not hold a seat in this room.");
  }

  private touch(room: Room, seat: Seat): void {
    const now = this.now();
    room.lastSeen[seat] = now;
    room.expiresAt = Math.min(now + this.lifetimes.idleMs, room.hardDeadline);
  }

  private expiresIn(room: Room): number {
    return Math.max(0, room.expiresAt - this.now());
  }

  /** Refuses an owner that holds its budget of live rooms; returns its rooms' map. */
  private ownerRooms(owner: string): Map<string, number> {
    let rooms = this.owners.get(owner);
    if (!rooms) {
      rooms = new Map();
      this.owners.set(owner, rooms);
    }
    const now = this.now();
    for (const [code, deadline] of rooms) if (deadline <= now || !this.findRoom(code)) rooms.delete(code);
    if (rooms.size >= this.roomsPerOwner) {
      const first = Math.min(...rooms.values());
      throw tooManyRoomsError(this.roomsPerOwner, first - now);
    }
    return rooms;
  }

  async openRoom(options: { e2e?: boolean; owner?: string } = {}): Promise<SeatGrant> {
    const owned = options.owner !== undefined && this.roomsPerOwner > 0 ? this.ownerRooms(options.owner) : undefined;
    if (this.used + ROOM_BYTES > this.maxBytes) throw storeFullError();
    let code = mintRoomCode();
    // A code is not minted again while its room's ending is still told.
    while (this.rooms.has(code) || this.endings.has(code)) code = mintRoomCode();
    const token = mintSeatToken();
    const now = this.now();
    const hardDeadline = now + this.lifetimes.maxMs;
    this.rooms.set(code, {
      tokenHashes: { a: hashSeatToken(token) },
      hardDeadline,
      expiresAt: Math.min(now + this.lifetimes.idleMs, hardDeadline),
      lastSeen: { a: now },
      bornAt: now,
      lastId: 0,
      inbox: { a: [], b: [] },
      pendingBytes: 0,
      idempotency: new Map(),
      idempotencyBytes: 0,
      e2e: options.e2e === true,
      owner: owned ? options.owner : undefined,
    });
    owned?.set(code, hardDeadline);
    this.used += ROOM_BYTES;
    this.tally.sessions++;
    return { code, seat: "a", token, expiresInMs: this.expiresIn(this.rooms.get(code)!), e2e: options.e2e === true };
  }

  async joinRoom(code: string): Promise<SeatGrant> {
    const room = this.liveRoom(code);
    if (room.tokenHashes.b !== undefined) throw apiError("full");
    const token = mintSeatToken();
    room.tokenHashes.b = hashSeatToken(token);
    this.touch(room, "b");
    this.tally.paired++;
    this.wakeups.publish(code, "joined");
    return { code, seat: "b", token, expiresInMs: this.expiresIn(room), e2e: room.e2e };
  }

  async sendMessage(input: SendInput): Promise<{ id: string; replayed: boolean }> {
    const { room, seat } = this.authenticate(input);
    if (room.e2e && !input.envelope) throw apiError("e2e_required");
    this.touch(room, seat);
    const keyField = input.idempotencyKey === undefined ? undefined : `${seat}:${input.idempotencyKey}`;
    if (keyField !== undefined) {
      const earlier = room.idempotency.get(keyField);
      if (earlier) {
        if (earlier.digest === input.textDigest) return { id: earlier.id, replayed: true };
        throw apiError("idempotency_conflict");
      }
    }
    const bytes = Buffer.byteLength(input.text, "utf8");
    const pending = room.inbox.a.length + room.inbox.b.length;
    if (pending >= MAX_PENDING_MESSAGES || room.pendingBytes + bytes > MAX_PENDING_BYTES)
      throw apiError("mailbox_full");
    const keyBytes = keyField === undefined ? 0 : idempotencyEntryBytes(keyField);
    if (this.used + bytes + keyBytes > this.maxBytes) throw storeFullError();
    // As send-8.lua: microseconds since the room opened, or one more than the last id.
    room.lastId = Math.max(room.lastId + 1, (this.now() - room.bornAt) * 1000);
    const id = String(room.lastId);
    const recipient = peerOf(seat);
    room.inbox[recipient].push({ id, text: input.text, bytes });
    room.pendingBytes += bytes;
    room.idempotencyBytes += keyBytes;
    this.used += bytes + keyBytes;
    if (keyField !== undefined) room.idempotency.set(keyField, { id, digest: input.textDigest ?? "" });
    this.tally.messages++;
    this.tally.bytes += bytes;
    this.wakeups.publish(input.code, recipient);
    return { id, replayed: false };
  }

  async readInbox(credentials: SeatCredentials, touch: boolean): Promise<InboxSnapshot> {
    const { room, seat } = this.authenticate(credentials);
    if (touch) this.touch(room, seat);
    const from = peerOf(seat);
    const messages: Message[] = room.inbox[seat].map(({ id, text }) => ({ id, from, text }));
    return { seat, messages, expiresInMs: this.expiresIn(room) };
  }

  async ackMessages(credentials: SeatCredentials, ids: string[]): Promise<{ acked: number }> {
    const { room, seat } = this.authenticate(credentials);
    this.touch(room, seat);
    const wanted = new Set(ids);
    const kept: StoredMessage[] = [];
    let acked = 0;
    for (const message of room.inbox[seat]) {
      if (wanted.has(message.id)) {
        acked++;
        room.pendingBytes -= message.bytes;
        this.used -= message.bytes;
      } else {
        kept.push(message);
      }
    }
    room.inbox[seat] = kept;
    return { acked };
  }

  async getStatus(credentials: SeatCredentials, touch = true): Promise<RoomStatus> {
    const { room, seat } = this.authenticate(credentials);
    if (touch) this.touch(room, seat);
    const peer = peerOf(seat);
    const peerJoined = room.tokenHashes.b !== undefined;
    const peerSeen = room.lastSeen[peer];
    return {
      seat,
      members: peerJoined ? ["a", "b"] : ["a"],
      expiresInMs: this.expiresIn(room),
      peerJoined,
      peerActive: peerSeen !== undefined && this.now() - peerSeen < PEER_ACTIVE_WINDOW_MS,
      pendingIn: room.inbox[seat].length,
      pendingOut: room.inbox[peer].length,
      e2e: room.e2e,
    };
  }

  async closeRoom(credentials: SeatCredentials, force: boolean): Promise<void> {
    const { room, seat } = this.authenticate(credentials);
    if (!force && room.inbox.a.length + room.inbox.b.length > 0) {
      this.touch(room, seat);
      throw apiError("unread");
    }
    const left = { a: room.inbox.a.length, b: room.inbox.b.length };
    const forced = left.a + left.b > 0;
    this.endRoom(credentials.code, room, {
      reason: forced ? "force_closed" : "closed",
      by: seat,
      at: this.now(),
      ...(forced ? { left } : {}),
    });
    this.tally.closed++;
  }

  async getStats(): Promise<StoreTally> {
    const now = this.now();
    let roomsOpen = 0;
    for (const room of this.rooms.values()) if (room.expiresAt > now) roomsOpen++;
    return { ...this.tally, roomsOpen };
  }

  async describeRoom(code: string): Promise<{ e2e: boolean } | undefined> {
    const room = this.rooms.get(code);
    return room && room.expiresAt > this.now() ? { e2e: room.e2e } : undefined;
  }

  async isReady(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}
