// The room store over its scripts: every room call is one Lua script (store/redis/lua),
// run by a ScriptBackend: EVALSHA on Redis, a Lua VM over an in-process keyspace without
// REDIS_URL. The scripts are the truth for every rule that must be atomic; pub/sub (or the
// in-process bus) only wakes waiting recvs.
import { MAX_PENDING_BYTES, MAX_PENDING_MESSAGES, type EndReason, type Message, type Seat } from "@duet/protocol";
import { type ApiError, apiError, roomEndedError, tooManyRoomsError } from "../errors.js";
import { hashSeatToken, mintRoomCode, mintSeatToken } from "./credentials.js";
import {
  emptyAsNone,
  endingFor,
  expiryReason,
  isActive,
  membersOf,
  noneAsEmpty,
  peerOf,
  type EndingRecord,
} from "./room-rules.js";
import { CONFIG_DEFAULTS } from "../config.js";
import type {
  InboxSnapshot,
  RoomLifetimes,
  RoomStatus,
  RoomStore,
  SeatCredentials,
  SeatGrant,
  SendInput,
  StoreBudget,
  StoreTally,
  WakeupBus,
} from "./room-store.js";
import { RedisKeys } from "./redis/keys.js";
import { fieldsOf, type NamedReply, type ScriptName, type ScriptReply } from "./redis/scripts.js";
import { Refusal, refused } from "./redis/refusals.js";
import type { Arg, ScriptBackend } from "./script-backend.js";

const seatOf = (value: unknown): Seat => (value === "b" ? "b" : "a");

/**
 * recv's reply (recv-7.lua: the seat, expires_in, and the messages as id, text pairs) as an
 * inbox: the one place a message is made from what the store keeps. A field added to the
 * protocol's Message is stored by the send and recv scripts and read here (the type says so);
 * every surface after this passes messages on whole.
 */
export function inboxOfReply(reply: NamedReply): InboxSnapshot {
  const inbox = fieldsOf(reply);
  const seat = seatOf(inbox.seat);
  const from = peerOf(seat);
  const pairs = inbox.messages as NamedReply;
  const messages: Message[] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2)
    messages.push({ id: String(pairs[i]), from, text: String(pairs[i + 1]) });
  return { seat, messages, expiresInMs: Number(inbox.expires_in) };
}

export interface ScriptedStoreOptions {
  backend: ScriptBackend;
  wakeups: WakeupBus;
  keyPrefix: string;
  lifetimes: RoomLifetimes;
  /** Live rooms per owner (roomsPerOwner); maxBytes is the in-process backend's. */
  budget?: StoreBudget;
}

export class ScriptedRoomStore implements RoomStore {
  readonly kind: "memory" | "redis";
  readonly wakeups: WakeupBus;
  readonly keys: RedisKeys;
  protected readonly backend: ScriptBackend;
  private readonly idleMs: number;
  private readonly maxMs: number;
  private readonly endingKeepMs: number;
  private readonly roomsPerOwner: number;

  constructor(options: ScriptedStoreOptions) {
    this.backend = options.backend;
    this.kind = options.backend.kind;
    this.roomsPerOwner = options.budget?.roomsPerOwner ?? 0;
    this.wakeups = options.wakeups;
    this.keys = new RedisKeys(options.keyPrefix);
    this.idleMs = options.lifetimes.idleMs;
    this.maxMs = options.lifetimes.maxMs;
    this.endingKeepMs = options.lifetimes.endingKeepMs ?? CONFIG_DEFAULTS.roomEndingKeepMs;
  }

  private run<T>(operation: () => Promise<T>): Promise<T> {
    return this.backend.guard(operation);
  }

  private change<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>> {
    return this.backend.change(name, args);
  }

  /**
   * Counts a room against its owner's budget of live rooms (claim-1.lua), or throws 429
   * too_many_rooms. A room closed or idle-expired before its hard cap still counts until it
   * is found gone here: only then, with the budget spent, are the owner's rooms looked up
   * (one EXISTS each, at most the budget) and the gone ones dropped, in the same script call
   * that claims the new one.
   */
  private async claimRoom(owner: string, code: string): Promise<void> {
    const key = this.keys.clientRooms(owner);
    const claim = (...gone: string[]) =>
      this.backend.script("duetClaim", [key, code, this.maxMs, this.roomsPerOwner, ...gone]);
    let [status, retryMs] = await claim();
    if (status !== Refusal.tooManyRooms) return;
    const codes = await this.backend.zrange(key, "0", "-1");
    const live = await Promise.all(codes.map((held) => this.backend.exists(this.keys.room(held)[0])));
    const gone = codes.filter((_, i) => live[i] === 0);
    if (gone.length > 0) [status, retryMs] = await claim(...gone);
    if (status === Refusal.tooManyRooms) throw tooManyRoomsError(this.roomsPerOwner, Number(retryMs));
  }

  /** Gives a claimed code back (its room was never opened). */
  private async unclaimRoom(owner: string, code: string): Promise<void> {
    await this.backend.script("duetClaim", [this.keys.clientRooms(owner), "", this.maxMs, this.roomsPerOwner, code]);
  }

  openRoom(options: { e2e?: boolean; owner?: string } = {}): Promise<SeatGrant> {
    const owner = this.roomsPerOwner > 0 ? options.owner : undefined;
    return this.run(async () => {
      // 60-bit codes collide about never; the script still refuses a code in use.
      for (;;) {
        const code = mintRoomCode();
        if (owner !== undefined) await this.claimRoom(owner, code);
        const token = mintSeatToken();
        const expiresInMs = await this.change("duetOpen", [
          ...this.keys.room(code),
          this.keys.tallyFor(code),
          hashSeatToken(token),
          this.idleMs,
          this.maxMs,
          this.endingKeepMs,
          options.e2e ? "1" : "0",
        ]);
        if (expiresInMs === Refusal.codeInUse) {
          // a live or recently ended room's code
          if (owner !== undefined) await this.unclaimRoom(owner, code);
          continue;
        }
        if (expiresInMs < 0) throw refused(expiresInMs);
        return { code, seat: "a", token, expiresInMs, e2e: options.e2e === true };
      }
    });
  }

  joinRoom(code: string): Promise<SeatGrant> {
    return this.run(async () => {
      const token = mintSeatToken();
      const reply = await this.change("duetJoin", [
        ...this.keys.room(code),
        this.keys.tallyFor(code),
        hashSeatToken(token),
        this.idleMs,
        this.keys.wakeChannel(code),
      ]);
      if (typeof reply === "number") throw refused(reply); // GONE: the bare 404, how it ended is for members
      const joined = fieldsOf(reply);
      return { code, seat: "b", token, expiresInMs: Number(joined.expires_in), e2e: joined.e2e === 1 };
    });
  }

  sendMessage(input: SendInput): Promise<{ id: string; replayed: boolean }> {
    return this.run(async () => {
      const reply = await this.change("duetSend", [
        ...this.keys.room(input.code),
        this.keys.tallyFor(input.code),
        input.tokenHash,
        this.idleMs,
        input.text,
        noneAsEmpty(input.idempotencyKey),
        noneAsEmpty(input.textDigest),
        MAX_PENDING_MESSAGES,
        MAX_PENDING_BYTES,
        this.keys.wakeChannel(input.code),
        input.envelope ? "1" : "0",
      ]);
      if (reply === Refusal.gone) throw await this.goneError(input);
      if (typeof reply === "number") throw refused(reply);
      const sent = fieldsOf(reply);
      return { id: String(sent.id), replayed: sent.replayed === 1 };
    });
  }

  readInbox(seat: SeatCredentials, touch: boolean): Promise<InboxSnapshot> {
    return this.run(async () => {
      const args = [...this.keys.room(seat.code), seat.tokenHash, this.idleMs];
      let reply = await this.backend.script("duetRecv", [...args, touch ? "1" : "0"]);
      // With write-ack, a recv hands out only messages the replicas have: a send that
      // answered 503 may still be on the master, and one that a failover then loses must
      // never have been seen (the reader would hold a message the relay no longer has). The
      // re-read writes (touch), so the WAIT behind it covers every write it observed.
      if (
        this.backend.acknowledgesWrites &&
        typeof reply !== "number" &&
        (fieldsOf(reply).messages as NamedReply).length > 0
      )
        reply = await this.change("duetRecv", [...args, "1"]);
      if (reply === Refusal.gone) throw await this.goneError(seat);
      if (typeof reply === "number") throw refused(reply);
      return inboxOfReply(reply);
    });
  }

  ackMessages(seat: SeatCredentials, ids: string[]): Promise<{ acked: number }> {
    return this.run(async () => {
      const status = await this.change("duetAck", [
        ...this.keys.room(seat.code),
        seat.tokenHash,
        this.idleMs,
        this.keys.wakeChannel(seat.code),
        ...ids,
      ]);
      if (status === Refusal.gone) throw await this.goneError(seat);
      if (status < 0) throw refused(status);
      return { acked: status };
    });
  }

  getStatus(seat: SeatCredentials, touch = true): Promise<RoomStatus> {
    return this.run(async () => {
      const reply = await this.backend.script("duetStatus", [
        ...this.keys.room(seat.code),
        seat.tokenHash,
        this.idleMs,
        touch ? "1" : "0",
      ]);
      if (reply === Refusal.gone) throw await this.goneError(seat);
      if (typeof reply === "number") throw refused(reply);
      const status = fieldsOf(reply);
      const peerJoined = status.peer_joined === 1;
      const peerSeen = emptyAsNone(status.peer_seen);
      return {
        seat: seatOf(status.seat),
        members: membersOf(peerJoined),
        expiresInMs: Number(status.expires_in),
        peerJoined,
        peerActive: isActive(peerSeen === undefined ? undefined : Number(peerSeen), Number(status.now)),
        pendingIn: Number(status.pending_in),
        unread: (status.unread as NamedReply).map(String),
        e2e: status.e2e === 1,
      };
    });
  }

  closeRoom(seat: SeatCredentials, force: boolean): Promise<void> {
    return this.run(async () => {
      const status = await this.change("duetClose", [
        ...this.keys.room(seat.code),
        this.keys.tallyFor(seat.code),
        seat.tokenHash,
        this.idleMs,
        force ? "1" : "0",
        this.keys.wakeChannel(seat.code),
      ]);
      if (status === Refusal.gone) throw await this.goneError(seat);
      if (status < 0) throw refused(status);
    });
  }

  /**
   * The 404 for a room that is gone: how it ended when the token holds one of its seats and
   * the ending is still kept, else bare. One more script call, on this path only.
   */
  private async goneError(seat: SeatCredentials): Promise<ApiError> {
    const reply = await this.backend.script("duetEnding", [this.keys.ending(seat.code), seat.tokenHash]);
    if (typeof reply === "number") return apiError("not_found");
    const ending = fieldsOf(reply);
    const me = seatOf(ending.seat);
    const closer = emptyAsNone(ending.by);
    const atMs = Number(ending.at);
    const record: EndingRecord = {
      reason: (emptyAsNone(ending.why) as EndReason | undefined) ?? expiryReason(atMs, Number(ending.hard)),
      atMs,
      left: { a: Number(ending.left_a), b: Number(ending.left_b) },
    };
    if (closer !== undefined) record.by = seatOf(closer);
    return roomEndedError(endingFor(record, me), me);
  }

  getStats(): Promise<StoreTally> {
    return this.run(async () => {
      // Two commands per tag; auto-pipelining sends them together (grouped per node in a
      // cluster). Callers cache the result (see CachedTally): this is not per-request work.
      const now = Date.now();
      const rows = await Promise.all(
        this.keys
          .allTallies()
          .map(({ tally, live }) =>
            Promise.all([
              this.backend.hmget(tally, "sessions", "paired", "messages", "bytes", "closed"),
              this.backend.zcount(live, `(${now}`, "+inf"),
            ]),
          ),
      );
      const totals: StoreTally = { sessions: 0, paired: 0, messages: 0, bytes: 0, closed: 0, roomsOpen: 0 };
      for (const [[sessions, paired, messages, bytes, closed], open] of rows) {
        totals.sessions += Number(sessions ?? 0);
        totals.paired += Number(paired ?? 0);
        totals.messages += Number(messages ?? 0);
        totals.bytes += Number(bytes ?? 0);
        totals.closed += Number(closed ?? 0);
        totals.roomsOpen += open;
      }
      return totals;
    });
  }

  describeRoom(code: string): Promise<{ e2e: boolean } | undefined> {
    return this.run(async () => {
      const [seatA, e2e] = await this.backend.hmget(this.keys.room(code)[0], "ta", "e2e");
      return seatA === null ? undefined : { e2e: e2e !== null };
    });
  }

  putNote(key: string, note: string, ttlMs: number): Promise<void> {
    return this.run(async () => {
      await this.backend.setWithExpiry(this.keys.note(key), note, Math.max(1, Math.round(ttlMs)));
    });
  }

  readNote(key: string): Promise<string | undefined> {
    return this.run(async () => (await this.backend.get(this.keys.note(key))) ?? undefined);
  }

  async isReady(): Promise<boolean> {
    try {
      return (await this.run(() => this.backend.ping())) === "PONG";
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.wakeups.close?.();
    await this.backend.close();
  }
}
