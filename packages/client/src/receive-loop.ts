// The receive loop: hands each message addressed to a seat to a handler, one at a time,
// oldest first, and acks it once handled. Messages come from the push stream, or from
// long-poll recv when the stream cannot work here (StreamSource decides); a long-polling
// loop acks what it handled with its next recv (recv's `ack`) rather than a call of its own.
import {
  ERRORS,
  MAX_WAIT_MS,
  describeRoomEnding,
  type AckResponse,
  type Message,
  type RecvResponse,
} from "@duet/protocol";
import { DuetE2eError, openAll } from "./encrypted-room.js";
import { DuetAbortError, DuetError } from "./errors.js";
import type {
  CallOptions,
  ReceiveLoopOptions,
  RecvOptions,
  SeatCredentials,
  StreamEvent,
  StreamOptions,
  WaitEvent,
} from "./options.js";
import { isTransient } from "./retry.js";
import { backoffMs, sleep } from "./timing.js";

/** The calls the loop makes (DuetClient's). */
export interface LoopCalls {
  /** recv without opening encrypted texts: the loop opens each one as it hands it on. */
  recvRaw(seat: SeatCredentials, options: RecvOptions): Promise<RecvResponse>;
  ack(seat: SeatCredentials, ids: string[], options: CallOptions): Promise<AckResponse>;
  stream(seat: SeatCredentials, options: StreamOptions): AsyncGenerator<StreamEvent>;
  /** Default retry budget of each recv and ack. */
  readonly retryTimeoutMs: number;
}

/**
 * Hands each message to `handle`, one at a time, oldest first. A message is acked only
 * after `handle` resolves; if `handle` throws, the loop stops with that error and the
 * message stays pending for a later reader. Within one loop a message is never handed twice
 * (if its ack is lost, the ack is retried without handing it again). Resolves with the
 * number of messages handled when the signal fires or maxMessages is reached; rejects with
 * DuetError not_found when the room is closed or expires.
 */
export async function receiveLoop(
  calls: LoopCalls,
  seat: SeatCredentials,
  handle: (message: Message) => unknown | Promise<unknown>,
  options: ReceiveLoopOptions = {},
): Promise<{ handled: number }> {
  const { signal, maxMessages } = options;
  const retry = { timeoutMs: options.retryTimeoutMs ?? calls.retryTimeoutMs, onWait: options.onWait };
  // Ids handed to `handle` whose ack has not been confirmed; acked ids never come back
  // from recv (a stream opened just before an ack may still send one: `acked` skips it).
  const handledNotAcked = new Set<string>();
  const acked = new RecentIds(1024);
  let handled = 0;
  const waitMs = options.waitMs ?? MAX_WAIT_MS;
  // The messages handled since the last recv ride on the next one as its `ack`: acked before
  // it reads, so they never come back, and no separate ack call is made.
  const longPoll = async () => {
    const ack = [...handledNotAcked];
    const answer = await calls.recvRaw(seat, {
      onWait: retry.onWait,
      signal,
      waitMs,
      timeoutMs: retry.timeoutMs + waitMs,
      ack,
    });
    for (const id of ack) {
      handledNotAcked.delete(id);
      acked.add(id);
    }
    return answer.messages;
  };
  /**
   * Acks handled messages. Deliberately not cancelled by the loop's signal: the messages
   * were handled, so their receipt should land. A transient failure that outlasts the retry
   * budget is not fatal: the ids stay in `handledNotAcked`, the next recv returns them, and
   * they are acked then without being handed again. Returns whether the ack landed.
   */
  const ackHandled = async (ids: string[]): Promise<boolean> => {
    try {
      await calls.ack(seat, ids, retry);
    } catch (error) {
      if (error instanceof DuetError && (isTransient(error) || error.code === "rate_limited")) return false;
      throw error;
    }
    for (const id of ids) handledNotAcked.delete(id);
    return true;
  };
  const source =
    options.transport === "long-poll"
      ? undefined
      : new StreamSource(calls, seat, options.transport === "stream", signal, retry.onWait, options.onRead);
  try {
    while (!signal?.aborted && (maxMessages === undefined || handled < maxMessages)) {
      let messages: Message[];
      // Whether these came from a recv: then their acks wait for the next recv.
      let polled = false;
      try {
        const streamed = await source?.next();
        polled = streamed === undefined;
        messages = streamed ?? (await longPoll());
      } catch (error) {
        if (signal?.aborted && error instanceof DuetAbortError) break;
        throw error;
      }
      messages = messages.filter((m) => !acked.has(m.id));
      const redelivered = messages.filter((m) => handledNotAcked.has(m.id)).map((m) => m.id);
      if (redelivered.length > 0 && !(await ackHandled(redelivered))) continue;
      for (const raw of messages) {
        if (redelivered.includes(raw.id)) continue;
        if (signal?.aborted || (maxMessages !== undefined && handled >= maxMessages)) break;
        const message = seat.e2e ? openAll(seat.e2e, [raw])[0]! : raw;
        if ("reason" in message) {
          if (!options.onRejected) throw new DuetE2eError(message);
          options.onRejected(message);
          handledNotAcked.add(message.id);
          if (!(await ackHandled([message.id]))) break;
          continue;
        }
        await handle(message);
        handled++;
        handledNotAcked.add(message.id);
        if (polled) continue;
        // The rest of this batch comes back with the next recv, after the lost ack is retried.
        if (!(await ackHandled([message.id]))) break;
        acked.add(message.id);
      }
    }
  } catch (error) {
    // What was handled before the failure is acked still (best effort: the failure is what the caller hears).
    if (handledNotAcked.size > 0) await ackHandled([...handledNotAcked]).catch(() => undefined);
    throw error;
  } finally {
    source?.close();
  }
  // The loop ends with no next recv to carry the last acks: one ack call.
  if (handledNotAcked.size > 0) await ackHandled([...handledNotAcked]);
  return { handled };
}

/** The last `size` ids seen, for dedupe. */
export class RecentIds {
  private readonly ids = new Set<string>();
  constructor(private readonly size: number) {}
  has(id: string): boolean {
    return this.ids.has(id);
  }
  add(id: string): void {
    this.ids.add(id);
    if (this.ids.size > this.size) this.ids.delete(this.ids.values().next().value!);
  }
}

/**
 * receiveLoop's messages from the push stream, in batches (what arrived since the last
 * call). Reconnects after a shutdown, a replacement or a broken connection. In "auto" mode
 * it gives up on streaming (next() returns undefined: the loop long-polls) when a stream
 * cannot be opened or keeps breaking; a refusal that means the room is over (the relay
 * answers not_found to recv too) also goes to long-poll, whose recv then says so.
 */
export class StreamSource {
  private events?: AsyncGenerator<StreamEvent>;
  private readonly closing = new AbortController();
  private failures = 0;
  private opened = false;
  private fallenBack = false;

  constructor(
    private readonly calls: Pick<LoopCalls, "stream">,
    private readonly seat: SeatCredentials,
    private readonly only: boolean,
    private readonly signal: AbortSignal | undefined,
    private readonly onWait?: (event: WaitEvent) => void,
    private readonly onRead?: (ids: string[]) => void,
  ) {}

  /** Messages that arrived, or undefined when the loop should long-poll instead. */
  async next(): Promise<Message[] | undefined> {
    const signal = this.signal ? AbortSignal.any([this.signal, this.closing.signal]) : this.closing.signal;
    for (;;) {
      if (this.fallenBack) return undefined;
      if (this.signal?.aborted) throw new DuetAbortError();
      this.events ??= this.calls.stream(this.seat, { signal });
      let next: IteratorResult<StreamEvent>;
      try {
        next = await this.events.next();
      } catch (error) {
        this.events = undefined;
        if (error instanceof DuetAbortError || this.signal?.aborted) throw new DuetAbortError(undefined, error);
        const refused =
          error instanceof DuetError &&
          error.status !== undefined &&
          !isTransient(error) &&
          error.code !== "rate_limited" &&
          error.code !== "too_many_waiters";
        this.failures++;
        if (refused || (!this.opened && !this.only) || this.failures >= 3) {
          // A stream that never worked here (a buffering proxy, say) or keeps
          // breaking: long-poll from now on. Its recv also reports a refusal properly.
          if (this.only) throw error;
          this.fallenBack = true;
          continue;
        }
        const delayMs = backoffMs(this.failures - 1, 250, 4000);
        this.onWait?.({ reason: "network", delayMs, attempt: this.failures });
        await sleep(delayMs, this.signal);
        continue;
      }
      if (next.done) {
        this.events = undefined;
        continue;
      }
      const event = next.value;
      if (event.event === "open") {
        this.opened = true;
        this.failures = 0;
        continue;
      }
      if (event.event === "message") return [event.message];
      if (event.event === "read") {
        this.onRead?.(event.ids);
        continue;
      }
      this.events = undefined;
      // replaced: another reader of this seat took over on that node; shutdown: the node
      // stops. Any other reason: the room ended (how, when the relay says), as recv's 404.
      if (event.reason === "replaced") await sleep(1000, this.signal);
      else if (event.reason !== "shutdown") {
        const message = event.ended
          ? `${describeRoomEnding(event.ended, this.seat.e2e?.seat)} Its code cannot be used again.`
          : ERRORS.not_found.message;
        throw new DuetError("not_found", message, { status: 404, ended: event.ended });
      }
    }
  }

  close(): void {
    this.closing.abort();
    void this.events?.return(undefined).catch(() => undefined);
  }
}
