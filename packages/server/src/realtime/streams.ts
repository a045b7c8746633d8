// The push stream (GET /v1/stream): a seat's pending messages, then each new one and a `read`
// event per ack of its own messages, until the room ends, a newer stream replaces it, or the
// node stops. It rides the long-poll's wake-up bus and does not consume. Idle, it costs no
// Redis call but the last-resort re-read every WAKE_RECHECK_SECONDS, and one shared timer
// writes every heartbeat. docs/streams.md; docs/protocol.md §6.5, §6.6.
import type { Seat } from "@duet/protocol";
import type { Message, RoomEnding, StreamEndReason } from "@duet/protocol";
import { ApiError } from "../errors.js";
import {
  isReadEvent,
  readIdsFor,
  type InboxSnapshot,
  type ReadEvent,
  type RoomStore,
  type SeatCredentials,
  type WakeEvent,
} from "../store/room-store.js";
import type { GoneSignal } from "./client-gone.js";
import type { TimerWheel } from "./timer-wheel.js";
import { Waiter } from "./waiter.js";
import type { WaiterAdmission } from "./admission.js";

const noop = (): void => undefined;

/** Proxies close a silent connection after 60 s (nginx's default read timeout): 20 s is well inside. */
export const HEARTBEAT_MS = 20_000;
/**
 * The heartbeat goes to one slice of the streams at a time, one slice every HEARTBEAT_MS /
 * HEARTBEAT_SLICES: each stream still gets one every HEARTBEAT_MS, and the node never writes
 * to all its streams in one turn of the event loop (at 17,000 streams that turn held the
 * loop for long enough, on a busy machine, that the Redis heartbeat timed out and calls
 * answered 503).
 */
const HEARTBEAT_SLICES = 20;
/** Streams one seat may hold on one node; the oldest is ended ("replaced") when one more opens. */
export const MAX_STREAMS_PER_SEAT = 2;
/** After a store failure the stream retries its read after this long, holding the connection… */
const RETRY_MS = 1000;
/**
 * Bytes written to a stream and not yet taken by its client beyond which the stream writes
 * nothing more until the client catches up (the connection drains): a client that stops
 * reading would otherwise have every later message, receipt and heartbeat kept in the
 * node's memory for as long as its connection stays open. Messages stay in the inbox until
 * acked, so one not written now is written after the drain (or by the next stream).
 */
export const STREAM_BACKLOG_BYTES = 64 * 1024;
/** …then twice as long each time, up to this (jittered): see OpenStreams.read. */
const MAX_RETRY_MS = 10_000;

/** Where a stream's events go: the HTTP route renders them as SSE or NDJSON. */
export interface StreamSink {
  message(message: Message): void;
  /** The peer acked (read) these messages the seat sent, oldest first. */
  read(ids: string[]): void;
  heartbeat(): void;
  /** The last event; the sink ends the response. ended: how the room ended, when it did. */
  end(reason: StreamEndReason, ended?: RoomEnding): void;
  /**
   * Bytes written and not yet taken by the client (absent: always 0). Past
   * STREAM_BACKLOG_BYTES the stream waits for `drained()` to be called before writing more.
   */
  backlog?(): number;
}

const congested = (sink: StreamSink) => (sink.backlog?.() ?? 0) > STREAM_BACKLOG_BYTES;

/** A store error that means the room is over for this seat: its end reason, and how it ended when the store knows. */
export function endReasonOf(error: unknown): { reason: StreamEndReason; ended?: RoomEnding } | undefined {
  if (!(error instanceof ApiError) || (error.code !== "not_found" && error.code !== "unauthorized")) return undefined;
  // How the room ended, as recv's 404 tells it; a room the store no longer remembers: gone.
  return error.ended ? { reason: error.ended.reason, ended: error.ended } : { reason: "gone" };
}

/** A stream that is listening and has read the inbox, not yet serving. */
export interface PreparedStream {
  seat: SeatCredentials;
  first: InboxSnapshot;
  waiter: StreamWaiter;
  /** Stops its wake-ups and gives back its reserved place (if serve() never registers it). */
  stopWatching: () => void;
  subscribed: boolean;
  /** Gives back the place taken under the node's waiter cap (stopWatching calls it too). */
  release: () => void;
}

interface OpenStream {
  seatKey: string;
  /** Its heartbeat slice (see OpenStreams.beat). */
  slice: number;
  sink: StreamSink;
  waiter: StreamWaiter;
  ended: boolean;
  endReason?: StreamEndReason;
}

/** Read receipts a stream holds between its listening and its first byte (a moment; bounded all the same). */
const MAX_HELD_RECEIPTS = 64;

/**
 * A stream's waiter: mail wakes it to re-read, as a recv's does; a read receipt for its seat
 * goes straight to the client as a `read` event, with no re-read. Receipts that arrive
 * before the stream serves (or before a read told its seat) are held until it does.
 */
export class StreamWaiter extends Waiter {
  /** The stream it serves, once serving. */
  stream?: OpenStream;
  private held?: ReadEvent[];

  protected override hear(event: WakeEvent): void {
    if (!isReadEvent(event)) {
      super.hear(event);
      return;
    }
    const stream = this.stream;
    const seat = this.concern as Seat | undefined;
    // Held until the stream serves, or until its client has taken what was written.
    if (stream === undefined || seat === undefined || (!stream.ended && congested(stream.sink))) {
      this.held ??= [];
      if (this.held.length < MAX_HELD_RECEIPTS) this.held.push(event);
      return;
    }
    const ids = readIdsFor(event, seat);
    if (ids && !stream.ended) stream.sink.read(ids);
  }

  /** Starts serving: the receipts held so far go out first. */
  serve(stream: OpenStream): void {
    this.stream = stream;
    this.flush();
  }

  /** The client took what was written: the receipts held meanwhile go out, and the stream re-reads. */
  drained = (): void => {
    this.flush();
    this.fire("wake");
  };

  private flush(): void {
    const held = this.held;
    this.held = undefined;
    if (held) for (const event of held) this.hear(event);
  }
}

/** Every open stream of this node: the per-seat limit, the shared heartbeat, shutdown. */
export class OpenStreams {
  private readonly streams = new Set<OpenStream>();
  private readonly bySeat = new Map<string, OpenStream[]>();
  private readonly slices = Array.from({ length: HEARTBEAT_SLICES }, () => new Set<OpenStream>());
  private nextSlice = 0;
  private beatSlice = 0;
  private heartbeat?: NodeJS.Timeout;
  private draining = false;

  constructor(
    private readonly store: RoomStore,
    private readonly recheckMs: number,
    private readonly wheel: TimerWheel,
    private readonly heartbeatMs = HEARTBEAT_MS,
    private readonly admission?: WaiterAdmission,
  ) {}

  get size(): number {
    return this.streams.size;
  }

  /** Shutdown: every stream gets `end` (shutdown) now, so its client reconnects elsewhere. */
  drain(): void {
    this.draining = true;
    for (const stream of this.streams) this.finish(stream, "shutdown");
  }

  /**
   * Opens a stream: proves the seat, finds the room and starts listening, before the first
   * byte (so errors are JSON answers). Listens first, then reads, as a recv does: a send
   * that lands before the listening began is in the read, any later one wakes the stream.
   * When wake-ups for the room do not reach this node yet, a first read (which costs no
   * subscription when the seat or room is wrong) comes before the listening, and a second after.
   */
  async open(seat: SeatCredentials, client?: string): Promise<PreparedStream> {
    // A stream always waits: past the node's waiter cap or its client's bound it is refused
    // before anything else. Its place is held until it ends (or is given up: stopWatching).
    const release = this.admission ? this.admission.reserve(client) : noop;
    if (typeof release === "string") throw this.admission!.refusal(release);
    try {
      return await this.prepare(seat, release);
    } catch (error) {
      release();
      throw error;
    }
  }

  private async prepare(seat: SeatCredentials, release: () => void): Promise<PreparedStream> {
    let snapshot: InboxSnapshot | undefined;
    if (!this.store.wakeups.isListening(seat.code)) snapshot = await this.store.readInbox(seat, true);
    // Wake-ups for the caller's inbox (every one until a read has told the seat).
    const waiter = new StreamWaiter(this.wheel, snapshot?.seat);
    let stop = noop;
    let subscribed = true;
    try {
      stop = await this.store.wakeups.watch(seat.code, waiter.onEvent);
    } catch {
      subscribed = false;
    }
    try {
      snapshot = await this.store.readInbox(seat, snapshot === undefined);
    } catch (error) {
      stop();
      throw error;
    }
    waiter.concern = snapshot.seat;
    const stopWatching = () => {
      stop();
      release();
    };
    return { seat, first: snapshot, waiter, stopWatching, subscribed, release };
  }

  /**
   * Serves an opened stream until it ends: sends what the inbox holds after the id `after`,
   * then each new message. Resolves when the stream is over (ended, or the client went
   * away: signal).
   */
  async serve(prepared: PreparedStream, after: number, sink: StreamSink, signal: GoneSignal): Promise<void> {
    const { seat, waiter, subscribed } = prepared;
    if (this.draining) {
      prepared.stopWatching();
      return sink.end("shutdown");
    }
    let lastSent = after;
    const stream: OpenStream = {
      seatKey: `${seat.code}:${seat.tokenHash}`,
      slice: this.nextSlice++ % HEARTBEAT_SLICES,
      sink,
      waiter,
      ended: false,
    };
    signal.addEventListener("abort", waiter.onGone);
    this.add(stream);
    waiter.serve(stream);
    try {
      let current: InboxSnapshot | undefined = prepared.first;
      for (;;) {
        if (stream.ended || signal.aborted || !current) return;
        for (const message of current.messages) {
          // Ids grow within a room; an inbox is oldest first. A client that has not taken
          // what was written gets the rest after the drain (which wakes this loop).
          if (congested(sink)) break;
          if (Number(message.id) > lastSent) {
            sink.message(message);
            lastSent = Number(message.id);
          }
        }
        // Wake at the room's expiry too (the re-read then ends the stream); unsubscribed,
        // re-read every second like a recv; otherwise only the last-resort re-check.
        const recheck = (subscribed ? this.recheckMs : RETRY_MS) * (0.8 + Math.random() * 0.4);
        const reason = await waiter.next(Math.min(recheck, Math.max(current.expiresInMs, 0) + 5));
        if (reason === "aborted" || reason === "drained" || stream.ended) return;
        // The last-resort re-read counts as activity, as a looping recv's would: a room with
        // a listening stream stays alive.
        current = await this.read(seat, stream, reason === "timer");
      }
    } finally {
      signal.removeEventListener("abort", waiter.onGone);
      prepared.stopWatching();
      this.remove(stream);
    }
  }

  /** The inbox, or undefined once the stream has ended (the room is gone: `end` sent). */
  private async read(seat: SeatCredentials, stream: OpenStream, touch = false): Promise<InboxSnapshot | undefined> {
    for (let failures = 0; ; failures++) {
      try {
        return await this.store.readInbox(seat, touch);
      } catch (error) {
        const end = endReasonOf(error);
        if (end) {
          this.finish(stream, end.reason, end.ended);
          return undefined;
        }
        // The store is unreachable: hold the stream (heartbeats go on) and try again, later
        // each time (1 s, 2 s, 4 s … 10 s, jittered). Every stream of a node retrying every
        // second was a storm of failing calls and their errors: at 14,000 streams a node spent
        // two thirds of its time in the GC and did not recover. The node's reconnect to Redis
        // wakes every stream at once anyway ("resync").
        const delay = Math.min(MAX_RETRY_MS, RETRY_MS * 2 ** failures) * (0.5 + Math.random());
        const next = await stream.waiter.next(delay);
        if (next === "aborted" || next === "drained" || stream.ended) return undefined;
      }
    }
  }

  private finish(stream: OpenStream, reason: StreamEndReason, ended?: RoomEnding): void {
    if (stream.ended) return;
    stream.ended = true;
    stream.endReason = reason;
    stream.sink.end(reason, ended);
    stream.waiter.fire("drained");
  }

  private add(stream: OpenStream): void {
    this.streams.add(stream);
    this.slices[stream.slice]!.add(stream);
    const same = this.bySeat.get(stream.seatKey) ?? [];
    same.push(stream);
    this.bySeat.set(stream.seatKey, same);
    // The oldest streams of the seat make room for the newest: the client that opened it
    // is the one that is listening now (a reconnect whose old connection is not dead yet).
    while (same.length > MAX_STREAMS_PER_SEAT) this.finish(same.shift()!, "replaced");
    if (!this.heartbeat) {
      this.heartbeat = setInterval(this.beat, this.heartbeatMs / HEARTBEAT_SLICES);
      this.heartbeat.unref();
    }
  }

  /** One slice's heartbeats. */
  private readonly beat = (): void => {
    const slice = this.slices[this.beatSlice]!;
    this.beatSlice = (this.beatSlice + 1) % HEARTBEAT_SLICES;
    // A stream whose client has bytes to take needs no heartbeat (and must not grow).
    for (const open of slice) if (!open.ended && !congested(open.sink)) open.sink.heartbeat();
  };

  private remove(stream: OpenStream): void {
    stream.ended = true;
    this.streams.delete(stream);
    this.slices[stream.slice]!.delete(stream);
    const same = this.bySeat.get(stream.seatKey);
    if (same) {
      const at = same.indexOf(stream);
      if (at >= 0) same.splice(at, 1);
      if (same.length === 0) this.bySeat.delete(stream.seatKey);
    }
    if (this.streams.size === 0) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }
}
