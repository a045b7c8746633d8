// Long-polls: recv answers at once when something is pending, otherwise waits for a wake-up,
// the room's end (404), or the wait running out (empty list); a waiting status answers
// when the peer's seat is claimed (or, with until_read, when the caller's messages up to an
// id are read), the room ends or the wait runs out. Shared by both stores.
import { WAITERS_PER_SEAT } from "@duet/protocol";
import { ApiError } from "../errors.js";
import type { InboxSnapshot, RoomStatus, RoomStore, SeatCredentials } from "../store/room-store.js";
import type { GoneSignal } from "./client-gone.js";
import type { TimerWheel } from "./timer-wheel.js";
import { Waiter, nextSequence, type Concern } from "./waiter.js";
import type { WaiterAdmission } from "./admission.js";

/** How often a recv re-reads when it could not subscribe to wake-ups. */
const UNSUBSCRIBED_RECHECK_MS = 1000;

export interface WaitOptions {
  waitMs: number;
  /** The caller's address as the rate limits count it: whose bound under the node's cap the wait counts in. */
  client?: string;
  /** Re-read this often even without a wake-up, in case one was lost in flight. */
  recheckMs: number;
  /** Aborted when the client disconnects. */
  signal: GoneSignal;
}

/** What a long-poll reads, and when its answer is ready (one object per kind, shared by every call). */
interface LongPoll<T extends { expiresInMs: number }> {
  /** What it reads (its re-reads are shared by the seat's waiters of the same kind). */
  kind: "inbox" | "status";
  /** One read; touch says whether it counts as activity. */
  read(store: RoomStore, seat: SeatCredentials, touch: boolean): Promise<T>;
  ready(snapshot: T): boolean;
  /** The wake-up that concerns this wait after a read (undefined: every one). */
  concern(snapshot: T): Concern | undefined;
  /**
   * Read again when the wait runs out: the answer then describes the room as it is, not as
   * it was at the last read (a status's expires_in). A recv's empty list needs no re-read.
   */
  rereadAtEnd?: boolean;
}

const MESSAGES: LongPoll<InboxSnapshot> = {
  kind: "inbox",
  read: (store, seat, touch) => store.readInbox(seat, touch),
  ready: (snapshot) => snapshot.messages.length > 0,
  // Wake-ups for the other seat's inbox are not ours (until a read tells our seat, every one counts).
  concern: (snapshot) => snapshot.seat,
};

const PEER: LongPoll<RoomStatus> = {
  kind: "status",
  read: (store, seat, touch) => store.getStatus(seat, touch),
  ready: (status) => status.peerJoined,
  concern: () => "joined",
  rereadAtEnd: true,
};

/** A status wait for a read receipt: ready once none of the caller's messages up to the id is unread. */
class UntilRead implements LongPoll<RoomStatus> {
  readonly kind = "status";
  readonly rereadAtEnd = true;
  constructor(private readonly id: number) {}
  read(store: RoomStore, seat: SeatCredentials, touch: boolean): Promise<RoomStatus> {
    return store.getStatus(seat, touch);
  }
  ready(status: RoomStatus): boolean {
    // Ids grow within a room: compare them as numbers (at most 8 unread).
    for (const id of status.unread) if (Number(id) <= this.id) return false;
    return true;
  }
  concern(status: RoomStatus): Concern {
    return status.seat === "a" ? "read:a" : "read:b";
  }
}

const NO_CAP = () => {};

/**
 * Tracks every waiting recv and status of this node, so that shutdown can answer them all at
 * once, and those of each seat: a seat holds at most `perSeat` of them, and one more answers
 * its oldest at once as if its wait ran out (newest wins, as with streams: the client that
 * asked last is the one listening; a recv never consumes, so nothing is lost).
 */
export class WaitingRecvs {
  private readonly waiters = new Set<Waiter>();
  /** Each seat's waiters (by room code and token hash), oldest first. */
  private readonly bySeat = new Map<string, Waiter[]>();
  /** Re-reads under way, by kind and seat, each with when it began (nextSequence). */
  private readonly reads = new Map<string, { startedAt: number; read: Promise<unknown> }>();
  private draining = false;

  constructor(
    private readonly store: RoomStore,
    private readonly wheel: TimerWheel,
    private readonly admission?: WaiterAdmission,
    private readonly perSeat = WAITERS_PER_SEAT,
  ) {}

  get size(): number {
    return this.waiters.size;
  }

  /** Shutdown: every waiting recv answers now with an empty list; new ones do not wait. */
  drain(): void {
    this.draining = true;
    for (const waiter of this.waiters) waiter.fire("drained");
  }

  /** The caller's pending messages, or undefined when the client went away. */
  waitForMessages(seat: SeatCredentials, options: WaitOptions): Promise<InboxSnapshot | undefined> {
    return this.longPoll(seat, options, MESSAGES, undefined);
  }

  /**
   * The caller's room status once the peer's seat is claimed, or when the wait runs out;
   * undefined when the client went away. The room's end rejects with its 404.
   */
  waitForPeer(seat: SeatCredentials, options: WaitOptions): Promise<RoomStatus | undefined> {
    return this.longPoll(seat, options, PEER, "joined");
  }

  /**
   * The caller's room status once none of its messages with an id up to `id` is unread (the
   * peer acked them: woken by the ack's read receipt, on any node), or when the wait runs
   * out; undefined when the client went away. The room's end rejects with its 404.
   */
  waitUntilRead(seat: SeatCredentials, id: number, options: WaitOptions): Promise<RoomStatus | undefined> {
    // Until a read tells the caller's seat, any seat's receipt wakes it.
    return this.longPoll(seat, options, new UntilRead(id), "read:");
  }

  private async longPoll<T extends { expiresInMs: number }>(
    seat: SeatCredentials,
    options: WaitOptions,
    poll: LongPoll<T>,
    concern: Concern | undefined,
  ): Promise<T | undefined> {
    // The wait counts from the request's arrival, whatever the reads before it cost.
    const deadline = Date.now() + options.waitMs;
    const mayWait = options.waitMs > 0 && !this.draining;
    // Past the node's waiter cap or the client's bound (realtime/admission.ts) a call is still
    // answered when its answer is there at once; only its waiting is refused. The place is
    // held from here until the call ends.
    const place = mayWait && this.admission ? this.admission.reserve(options.client) : NO_CAP;
    const admitted = typeof place === "function";
    try {
      // Wake-ups for this room already reach this node (another waiter, or a recent one):
      // listen first, and one read covers everything.
      if (mayWait && admitted && this.store.wakeups.isListening(seat.code))
        return await this.listenAndWait(seat, deadline, options, poll, new Waiter(this.wheel, concern));
      // Otherwise a call that is answered at once costs one script call and no subscription.
      const first = await poll.read(this.store, seat, true);
      if (poll.ready(first) || !mayWait) return first;
      if (!admitted) throw this.admission!.refusal(place);
      const waiter = new Waiter(this.wheel, poll.concern(first));
      return await this.listenAndWait(seat, deadline, options, poll, waiter, first);
    } finally {
      if (admitted) place();
    }
  }

  /**
   * A re-read (no activity) for a woken waiter: the seat's waiters woken by one send share one
   * read, and so one snapshot and one rendered answer (a 2 MiB text is 12.6 MB of JSON each).
   * A waiter joins only a read that began after it was woken, which sees what woke it.
   */
  private reread<T extends { expiresInMs: number }>(
    poll: LongPoll<T>,
    seat: SeatCredentials,
    seatKey: string,
    waiter: Waiter,
  ): Promise<T> {
    const key = `${poll.kind}:${seatKey}`;
    const shared = this.reads.get(key);
    if (shared && shared.startedAt > waiter.firedAt) return shared.read as Promise<T>;
    const entry = { startedAt: nextSequence(), read: poll.read(this.store, seat, false) };
    this.reads.set(key, entry);
    const done = () => {
      if (this.reads.get(key) === entry) this.reads.delete(key);
    };
    entry.read.then(done, done);
    return entry.read as Promise<T>;
  }

  /** Registers a waiter of `seatKey`; past the seat's bound its oldest is answered now. */
  private addToSeat(seatKey: string, waiter: Waiter): void {
    const same = this.bySeat.get(seatKey);
    if (!same) return void this.bySeat.set(seatKey, [waiter]);
    same.push(waiter);
    while (same.length > this.perSeat) same.shift()!.fire("replaced");
  }

  private removeFromSeat(seatKey: string, waiter: Waiter): void {
    const same = this.bySeat.get(seatKey);
    if (!same) return;
    const at = same.indexOf(waiter);
    if (at >= 0) same.splice(at, 1);
    if (same.length === 0) this.bySeat.delete(seatKey);
  }

  /**
   * The answer when the wait runs out: read again where the poll asks for it (a status as at
   * its answer); if the store cannot answer that read, the last one read (the room's end
   * still rejects with its 404).
   */
  private async atEnd<T extends { expiresInMs: number }>(
    poll: LongPoll<T>,
    seat: SeatCredentials,
    current: T,
  ): Promise<T> {
    if (!poll.rereadAtEnd) return current;
    try {
      return await poll.read(this.store, seat, false);
    } catch (error) {
      if (error instanceof ApiError && error.code === "unavailable") return current;
      throw error;
    }
  }

  /**
   * Listens for the room's wake-ups, then reads: a send that landed before the listening
   * began is seen by this read, and any later one wakes the waiter.
   */
  private async listenAndWait<T extends { expiresInMs: number }>(
    seat: SeatCredentials,
    deadline: number,
    options: WaitOptions,
    poll: LongPoll<T>,
    waiter: Waiter,
    earlier?: T,
  ): Promise<T | undefined> {
    const { signal } = options;
    signal.addEventListener("abort", waiter.onGone);
    // Registered before anything can stall, so that shutdown reaches this recv too.
    const seatKey = `${seat.code}:${seat.tokenHash}`;
    this.waiters.add(waiter);
    this.addToSeat(seatKey, waiter);
    if (this.draining) waiter.fire("drained");
    let stopWatching: (() => void) | undefined;
    let recheckMs = options.recheckMs;
    try {
      // A subscription that fails, or is not confirmed in time (the bus bounds that wait:
      // a cluster shard's subscriber being replaced, say), does not fail the recv: it
      // re-reads every second instead.
      try {
        stopWatching = await this.store.wakeups.watch(seat.code, waiter.onEvent);
      } catch {
        recheckMs = Math.min(recheckMs, UNSUBSCRIBED_RECHECK_MS);
      }
      if (signal.aborted) return undefined;
      // Only the first read counts as activity.
      let current = await poll.read(this.store, seat, earlier === undefined);
      waiter.concern = poll.concern(current);
      for (;;) {
        if (poll.ready(current)) return current;
        const remaining = deadline - Date.now();
        if (remaining <= 0) return this.atEnd(poll, seat, current);
        // Wake at the room's expiry too: the re-read then answers 404.
        // The re-check is jittered so that recvs that arrived together do not re-read together.
        const recheck = recheckMs * (0.8 + Math.random() * 0.4);
        const reason = await waiter.next(Math.min(remaining, recheck, Math.max(current.expiresInMs, 0) + 5));
        if (reason === "aborted") return undefined;
        if (reason === "drained") return current;
        // A newer waiter of the seat took this one's place: answered as if its wait ran out.
        if (reason === "replaced" || (reason === "timer" && Date.now() >= deadline))
          return this.atEnd(poll, seat, current);
        current = await this.reread(poll, seat, seatKey, waiter);
        waiter.concern = poll.concern(current);
      }
    } finally {
      this.waiters.delete(waiter);
      this.removeFromSeat(seatKey, waiter);
      signal.removeEventListener("abort", waiter.onGone);
      stopWatching?.();
    }
  }
}
