// DuetClient: the typed SDK over fetch. One method per endpoint, plus the flows people
// want: waitForPeer, receiveLoop, and a send that retries safely with an idempotency key.
import { randomUUID } from "node:crypto";
import {
  ENDPOINTS,
  ERRORS,
  MAX_PENDING_MESSAGES,
  MAX_TEXT_BYTES,
  MAX_WAIT_MS,
  RoomEnding,
  USER_AGENT,
  describeRoomEnding,
  normalizeRoomCode,
  type AckResponse,
  type CloseResponse,
  type EndpointInput,
  type EndpointResponse,
  type EndpointSpec,
  type JoinResponse,
  type Message,
  type OpenResponse,
  type OperationId,
  type RecvResponse,
  type SendResponse,
  type StatsResponse,
  type StatusResponse,
} from "@duet/protocol";
import type { z } from "zod";
import { E2eSession, joinUrlWithKey, newRoomKey, roomKeyInText, type E2eRejectReason } from "./e2e.js";
import { DuetAbortError, DuetError, DuetNetworkError, DuetTimeoutError, isProtocolCode } from "./errors.js";
import { extractRoomCode } from "./room-input.js";
import { Deadline, backoffMs, sleep } from "./timing.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

/** What a seat-bound call needs: the room code and this seat's secret token. */
export interface SeatCredentials {
  code: string;
  token: string;
  /** In an end-to-end encrypted room: the seat's session (key and sequence numbers). send seals, recv opens. */
  e2e?: E2eSession;
}

/** open's answer; in an encrypted room join_url and share carry #k=<key>, and `e2e_session` is the opener's session. */
export type OpenedRoom = OpenResponse & { key?: string; e2e_session?: E2eSession };
/** join's answer; `e2e_session` when the room is encrypted and the key was given. */
export type JoinedRoom = JoinResponse & { e2e_session?: E2eSession };

/** A message of an encrypted room, decrypted: `seq` is the sender's count; `missing` the numbers skipped before it. */
export type OpenedMessage = Message & { seq?: number; missing?: { from: number; to: number } };
/** A message of an encrypted room that was refused: it is never shown as text. */
export interface RejectedMessage {
  id: string;
  from: Message["from"];
  reason: E2eRejectReason;
  explanation: string;
}
export type OpenedRecvResponse = { messages: OpenedMessage[]; rejected?: RejectedMessage[] };

/** Thrown by receiveLoop when a message of an encrypted room is refused; the message stays pending. */
export class DuetE2eError extends DuetError {
  constructor(readonly rejected: RejectedMessage) {
    super(
      "e2e",
      `Message ${rejected.id} from seat ${rejected.from} was refused: it ${rejected.explanation}. It stays pending; ack it to drop it.`,
    );
    this.name = "DuetE2eError";
  }
}

export interface DuetClientOptions {
  /** Relay base URL, e.g. https://relay.example. Default http://127.0.0.1:8080. */
  baseUrl?: string;
  /** fetch implementation; default the global fetch of Node. Tests inject one. */
  fetch?: typeof fetch;
  /** Longest wait for one HTTP answer (recv adds its wait on top). Default 30 s. */
  requestTimeoutMs?: number;
  /** Total time a call may spend retrying (rate limits, network errors). Default 30 s. */
  retryTimeoutMs?: number;
  /** Clock, for tests. Default Date.now. */
  now?: () => number;
}

export interface CallOptions {
  /** Cancels the call (and its retries); it then rejects with DuetAbortError. */
  signal?: AbortSignal;
  /** Total time for this call including retries; default the client's retryTimeoutMs. */
  timeoutMs?: number;
  /** Told before each wait, e.g. to show "rate limited, retrying in 2 s". */
  onWait?: (event: WaitEvent) => void;
}

/** Why a flow is waiting, and for how long (when known). */
export interface WaitEvent {
  reason: "rate_limited" | "mailbox_full" | "network" | "unavailable" | "peer";
  delayMs: number;
  attempt: number;
}

export interface SendOptions extends CallOptions {
  /** Reuse to make a retry of the same logical send return the same id. Default: a fresh random key. */
  idempotencyKey?: string;
}

export interface RecvOptions extends CallOptions {
  /** Milliseconds the relay may hold the call open waiting for a message, 0..25000. Default 25000. */
  waitMs?: number;
}

export interface WaitForPeerOptions extends CallOptions {
  /** Longest wait of one long-poll (GET /v1/status?wait=), 1..25000 ms. Default 25000. */
  pollMs?: number;
}

export interface StatusOptions extends CallOptions {
  /** Milliseconds the relay may hold the call open until the peer joins, 0..25000. Default 0. */
  waitMs?: number;
}

export interface ReceiveLoopOptions {
  /** Stops the loop; it then resolves. */
  signal?: AbortSignal;
  /**
   * How messages arrive. "auto" (default): the push stream (GET /v1/stream), falling back
   * to long-poll recv for the rest of the loop when the stream cannot be opened or delivers
   * nothing (a proxy that buffers, a relay without streams). "stream": the stream only.
   * "long-poll": recv only.
   */
  transport?: "auto" | "stream" | "long-poll";
  /** Long-poll wait per recv, 0..25000 ms. Default 25000. */
  waitMs?: number;
  /** Resolve after this many messages were handled and acked. Default: run until aborted. */
  maxMessages?: number;
  /** Time each recv and ack may spend retrying before the loop gives up. Default the client's retryTimeoutMs. */
  retryTimeoutMs?: number;
  onWait?: (event: WaitEvent) => void;
  /** Encrypted rooms: told about a refused message, which is then acked (dropped). Without it the loop stops with DuetE2eError. */
  onRejected?: (rejected: RejectedMessage) => void;
}

/** One event of the push stream: a message addressed to this seat, or the stream's end and why. */
export type StreamEvent =
  | { event: "open" }
  | { event: "message"; message: Message }
  | { event: "end"; reason: string; ended?: RoomEnding };

export interface StreamOptions {
  /** Closes the stream; iteration then ends with DuetAbortError. */
  signal?: AbortSignal;
  /** Resume after this message id. */
  after?: string;
  /** The relay writes a first byte at once; without it within this long the stream counts as broken (a buffering proxy). Default 5000. */
  firstByteTimeoutMs?: number;
}

/** Send budget: mailbox_full waits for the peer to read, which takes longer than a rate limit. */
const DEFAULT_SEND_TIMEOUT_MS = 120_000;
const DEFAULT_WAIT_FOR_PEER_MS = 300_000;
/** recv is answered within its wait plus a small margin; beyond this the connection is dead. */
const RECV_ANSWER_MARGIN_MS = 10_000;

type RetryKind = "refusals" | "refusals-and-network";

/** The typed duet SDK. Every call sends User-Agent duet/0.1. */
export class DuetClient {
  readonly baseUrl: string;
  private readonly fetchImpl: typeof fetch;
  private readonly requestTimeoutMs: number;
  private readonly retryTimeoutMs: number;
  private readonly now: () => number;

  constructor(options: DuetClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.retryTimeoutMs = options.retryTimeoutMs ?? 30_000;
    this.now = options.now ?? Date.now;
  }

  // ---- endpoints ----------------------------------------------------------------------

  /** Opens a room and takes seat "a". The token is secret; `share` is what to paste to the peer. */
  async open(options: CallOptions & { e2e?: boolean } = {}): Promise<OpenedRoom> {
    // A network failure is not retried: the room may exist already, and a second open would orphan one.
    const opened = await this.retrying("open", "refusals", options, (timeoutMs) =>
      this.call("open", options.e2e ? { e2e: true } : {}, { signal: options.signal, timeoutMs }),
    );
    if (!options.e2e) return opened;
    if (opened.e2e !== true)
      throw new DuetError(
        "invalid_response",
        "The relay did not open an end-to-end encrypted room (it may predate them).",
      );
    // The key is made here and never sent: it travels only in the fragment of the join address.
    const key = newRoomKey();
    const joinUrl = joinUrlWithKey(opened.join_url, key);
    const share = `${opened.share.split(opened.join_url).join(joinUrl).replace(/\n+$/, "")}
End-to-end encrypted: join with the whole address above (its #k= part is the room key, which the relay never sees). Share it with the peer only.`;
    return { ...opened, join_url: joinUrl, share, key, e2e_session: E2eSession.start(opened.code, opened.seat, key) };
  }

  /** Joins a room by its code and takes seat "b". Case, spaces and dashes in the code are tolerated. */
  async join(code: string, options: CallOptions & { key?: string } = {}): Promise<JoinedRoom> {
    // A join address with #k=<key> (or the share block) gives the key of an encrypted room.
    const key = options.key ?? roomKeyInText(code);
    const room = key === undefined ? code : (extractRoomCode(code)?.code ?? code);
    // Not retried after a network failure either: if the first join landed, a retry answers 409 full.
    const joined = await this.retrying("join", "refusals", options, (timeoutMs) =>
      this.call("join", { code: canonicalCode(room) }, { signal: options.signal, timeoutMs }),
    );
    if (joined.e2e && key !== undefined)
      return { ...joined, e2e_session: E2eSession.start(joined.code, joined.seat, key) };
    return joined;
  }

  /**
   * Sends a text to the peer and returns its id (accepted, not yet read). Retries network
   * errors, 503 and 429 rate_limited (after Retry-After) with the same idempotency key, so
   * a retry never delivers twice; on 429 mailbox_full it waits until the room has room
   * again (the peer acked) and sends nothing else meanwhile. Gives up after timeoutMs
   * (default 120 s) with the last refusal.
   */
  async send(seat: SeatCredentials, text: string, options: SendOptions = {}): Promise<SendResponse> {
    const bytes = Buffer.byteLength(text, "utf8");
    const limit = seat.e2e ? seat.e2e.maxTextBytes() : MAX_TEXT_BYTES;
    if (bytes > limit) {
      const where = seat.e2e
        ? ` in this end-to-end encrypted room (its envelope must stay within ${MAX_TEXT_BYTES} bytes)`
        : "";
      throw new DuetError(
        "too_large",
        `The text is ${bytes} UTF-8 bytes; at most ${limit} fit${where}. ${ERRORS.too_large.remedy}`,
        { status: 400 },
      );
    }
    // Sealed once, before the first attempt: every retry sends the same envelope with the same key.
    if (seat.e2e) text = seat.e2e.seal(text);
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    const body = { code: canonicalCode(seat.code), text, idempotency_key: idempotencyKey };
    const mailbox: MailboxWatch = {};
    return this.retrying(
      "send",
      "refusals-and-network",
      { timeoutMs: DEFAULT_SEND_TIMEOUT_MS, ...options },
      (timeoutMs) => this.call("send", body, { token: seat.token, signal: options.signal, timeoutMs }),
      (deadline, refusal) => this.waitForMailboxSpace(seat, deadline, refusal, mailbox, options),
    );
  }

  /** Peeks at pending messages for this seat (oldest first), waiting up to waitMs for one. Does not consume. */
  async recv(seat: SeatCredentials, options: RecvOptions = {}): Promise<OpenedRecvResponse> {
    const answer = await this.recvRaw(seat, options);
    if (!seat.e2e) return answer;
    const messages: OpenedMessage[] = [];
    const rejected: RejectedMessage[] = [];
    for (const item of openAll(seat.e2e, answer.messages)) {
      if ("reason" in item) rejected.push(item);
      else messages.push(item);
    }
    return { messages, rejected };
  }

  private recvRaw(seat: SeatCredentials, options: RecvOptions = {}): Promise<RecvResponse> {
    const waitMs = options.waitMs ?? MAX_WAIT_MS;
    const query = { code: canonicalCode(seat.code), wait: String(waitMs) };
    return this.retrying(
      "recv",
      "refusals-and-network",
      { ...options, timeoutMs: options.timeoutMs ?? this.retryTimeoutMs + waitMs },
      (timeoutMs) =>
        this.call("recv", query, {
          token: seat.token,
          signal: options.signal,
          timeoutMs: Math.max(timeoutMs, waitMs + RECV_ANSWER_MARGIN_MS),
        }),
    );
  }

  /** Acknowledges (deletes) received messages: the delivery receipt. Idempotent. */
  ack(seat: SeatCredentials, ids: string[], options: CallOptions = {}): Promise<AckResponse> {
    const body = { code: canonicalCode(seat.code), ids };
    return this.retrying("ack", "refusals-and-network", options, (timeoutMs) =>
      this.call("ack", body, { token: seat.token, signal: options.signal, timeoutMs }),
    );
  }

  /**
   * Room status for this seat: members, lifetime, whether the peer joined and is active,
   * pending counts. With waitMs the relay answers as soon as the peer has joined (or the
   * wait runs out, or the room ends).
   */
  status(seat: SeatCredentials, options: StatusOptions = {}): Promise<StatusResponse> {
    const waitMs = options.waitMs ?? 0;
    const query: EndpointInput<"status"> = { code: canonicalCode(seat.code) };
    if (waitMs > 0) query.wait = String(waitMs);
    return this.retrying(
      "status",
      "refusals-and-network",
      { ...options, timeoutMs: options.timeoutMs ?? this.retryTimeoutMs + waitMs },
      (timeoutMs) =>
        this.call("status", query, {
          token: seat.token,
          signal: options.signal,
          timeoutMs: waitMs > 0 ? Math.max(timeoutMs, waitMs + RECV_ANSWER_MARGIN_MS) : timeoutMs,
        }),
    );
  }

  /**
   * Closes the room for both seats. Without force the relay refuses (409 unread) while any
   * message is unacked. A retry after a lost answer that finds the room gone counts as closed.
   */
  async close(seat: SeatCredentials, options: CallOptions & { force?: boolean } = {}): Promise<CloseResponse> {
    const body = { code: canonicalCode(seat.code), force: options.force ?? false };
    return this.retrying("close", "refusals-and-network", options, async (timeoutMs, attempt) => {
      try {
        return await this.call("close", body, { token: seat.token, signal: options.signal, timeoutMs });
      } catch (error) {
        if (attempt > 0 && error instanceof DuetError && error.code === "not_found") return { ok: true as const };
        throw error;
      }
    });
  }

  /** The public tally: totals only, no bodies or tokens. */
  stats(options: CallOptions = {}): Promise<StatsResponse> {
    return this.retrying("stats", "refusals-and-network", options, (timeoutMs) =>
      this.call("stats", undefined, { signal: options.signal, timeoutMs }),
    );
  }

  /**
   * The push stream (GET /v1/stream, NDJSON): this seat's pending messages, oldest first,
   * then each new one as it arrives, until the `end` event (the room's end reason, with
   * `ended`, or gone: the room ended; replaced; shutdown: reconnect). Does not consume: ack as usual; a new stream sends
   * unacked messages again (dedupe by id). Rejects with the relay's DuetError when it
   * refuses the stream, DuetNetworkError when the connection fails or no first byte comes
   * within firstByteTimeoutMs. Raw texts: in an encrypted room open them with the session.
   */
  async *stream(seat: SeatCredentials, options: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    const query = new URLSearchParams({ code: canonicalCode(seat.code), format: "ndjson" });
    if (options.after !== undefined) query.set("after", options.after);
    const url = `${this.baseUrl}/v1/stream?${query}`;
    const closing = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, closing.signal]) : closing.signal;
    const firstByteMs = options.firstByteTimeoutMs ?? 5000;
    const failure = (error: unknown, what: string): DuetError => {
      if (options.signal?.aborted) return new DuetAbortError(undefined, error);
      return new DuetNetworkError(`The stream from ${this.baseUrl} ${what} (${describeCause(error)}).`, error);
    };
    let timer: NodeJS.Timeout | undefined;
    const firstByte = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        closing.abort();
        reject(
          new DuetNetworkError(
            `The stream from ${this.baseUrl} sent nothing within ${firstByteMs} ms: a proxy may be buffering it.`,
          ),
        );
      }, firstByteMs);
    });
    firstByte.catch(() => undefined);
    try {
      let response: Response;
      try {
        response = await Promise.race([
          this.fetchImpl(url, {
            headers: {
              "User-Agent": USER_AGENT,
              Accept: "application/x-ndjson",
              Authorization: `Bearer ${seat.token}`,
            },
            signal,
          }),
          firstByte,
        ]);
      } catch (error) {
        throw error instanceof DuetError ? error : failure(error, "could not be opened");
      }
      if (
        !response.ok ||
        !(response.headers.get("content-type") ?? "").startsWith("application/x-ndjson") ||
        !response.body
      ) {
        const text = await response.text().catch(() => "");
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        throw response.ok
          ? new DuetError("invalid_response", "GET /v1/stream answered something that is not a duet stream.", {
              status: response.status,
            })
          : errorFromAnswer(response, json, "GET", "/v1/stream");
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      let first = true;
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = first ? await Promise.race([reader.read(), firstByte]) : await reader.read();
        } catch (error) {
          throw error instanceof DuetError ? error : failure(error, "broke");
        }
        if (first) {
          clearTimeout(timer);
          first = false;
          yield { event: "open" };
        }
        if (chunk.done) throw new DuetNetworkError(`The stream from ${this.baseUrl} ended without an end event.`);
        buffered += decoder.decode(chunk.value, { stream: true });
        for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (!line) continue;
          let event: {
            event?: unknown;
            id?: unknown;
            from?: unknown;
            text?: unknown;
            reason?: unknown;
            ended?: unknown;
          };
          try {
            event = JSON.parse(line);
          } catch {
            throw new DuetError("invalid_response", "GET /v1/stream sent a line that is not JSON.");
          }
          if (
            event.event === "message" &&
            typeof event.id === "string" &&
            (event.from === "a" || event.from === "b") &&
            typeof event.text === "string"
          ) {
            yield { event: "message", message: { id: event.id, from: event.from, text: event.text } };
          } else if (event.event === "end") {
            const ended = RoomEnding.safeParse(event.ended);
            yield {
              event: "end",
              reason: typeof event.reason === "string" ? event.reason : "unknown",
              ...(ended.success ? { ended: ended.data } : {}),
            };
            return;
          }
        }
      }
    } finally {
      clearTimeout(timer);
      closing.abort();
    }
  }

  // ---- flows --------------------------------------------------------------------------

  /**
   * Long-polls status (GET /v1/status?wait=) until the second seat is claimed and returns
   * that status: the relay answers the moment the peer joins, with no polling in between.
   * Rejects with DuetTimeoutError after timeoutMs (default 5 min), DuetAbortError when
   * signalled, DuetError not_found (with `ended`) when the room ends first.
   */
  async waitForPeer(seat: SeatCredentials, options: WaitForPeerOptions = {}): Promise<StatusResponse> {
    const deadline = new Deadline(
      options.timeoutMs ?? DEFAULT_WAIT_FOR_PEER_MS,
      "Waiting for the peer to join",
      this.now,
    );
    const pollMs = Math.min(Math.max(options.pollMs ?? MAX_WAIT_MS, 1), MAX_WAIT_MS);
    for (let attempt = 0; ; attempt++) {
      const waitMs = Math.min(pollMs, Math.max(0, deadline.remainingMs()));
      if (attempt > 0) options.onWait?.({ reason: "peer", delayMs: waitMs, attempt });
      const status = await this.status(seat, {
        signal: options.signal,
        onWait: options.onWait,
        waitMs,
        timeoutMs: Math.max(1, deadline.remainingMs()) + RECV_ANSWER_MARGIN_MS,
      });
      if (status.peer_joined) return status;
      if (deadline.expired()) throw deadline.error();
    }
  }

  /**
   * Long-polls recv and hands each message to `handle`, one at a time, oldest first. A
   * message is acked only after `handle` resolves; if `handle` throws, the loop stops with
   * that error and the message stays pending for a later reader. Within one loop a message
   * is never handed twice (if its ack is lost, the ack is retried without handing it again).
   * Resolves with the number of messages handled when the signal fires or maxMessages is
   * reached; rejects with DuetError not_found when the room is closed or expires.
   */
  async receiveLoop(
    seat: SeatCredentials,
    handle: (message: Message) => unknown | Promise<unknown>,
    options: ReceiveLoopOptions = {},
  ): Promise<{ handled: number }> {
    const { signal, maxMessages } = options;
    const retry = { timeoutMs: options.retryTimeoutMs ?? this.retryTimeoutMs, onWait: options.onWait };
    // Ids handed to `handle` whose ack has not been confirmed; acked ids never come back
    // from recv (a stream opened just before an ack may still send one: `acked` skips it).
    const handledNotAcked = new Set<string>();
    const acked = new RecentIds(1024);
    let handled = 0;
    const waitMs = options.waitMs ?? MAX_WAIT_MS;
    const longPoll = async () =>
      (await this.recvRaw(seat, { onWait: retry.onWait, signal, waitMs, timeoutMs: retry.timeoutMs + waitMs }))
        .messages;
    const source =
      options.transport === "long-poll"
        ? undefined
        : new StreamSource(this, seat, options.transport === "stream", signal, retry.onWait);
    try {
      while (!signal?.aborted && (maxMessages === undefined || handled < maxMessages)) {
        let messages: Message[];
        try {
          messages = (await source?.next()) ?? (await longPoll());
        } catch (error) {
          if (signal?.aborted && error instanceof DuetAbortError) break;
          throw error;
        }
        messages = messages.filter((m) => !acked.has(m.id));
        const redelivered = messages.filter((m) => handledNotAcked.has(m.id)).map((m) => m.id);
        if (redelivered.length > 0 && !(await this.ackHandled(seat, redelivered, handledNotAcked, retry))) continue;
        for (const raw of messages) {
          if (redelivered.includes(raw.id)) continue;
          if (signal?.aborted || (maxMessages !== undefined && handled >= maxMessages)) break;
          const message = seat.e2e ? openAll(seat.e2e, [raw])[0]! : raw;
          if ("reason" in message) {
            if (!options.onRejected) throw new DuetE2eError(message);
            options.onRejected(message);
            handledNotAcked.add(message.id);
            if (!(await this.ackHandled(seat, [message.id], handledNotAcked, retry))) break;
            continue;
          }
          await handle(message);
          handled++;
          handledNotAcked.add(message.id);
          // The rest of this batch comes back with the next recv, after the lost ack is retried.
          if (!(await this.ackHandled(seat, [message.id], handledNotAcked, retry))) break;
          acked.add(message.id);
        }
      }
    } finally {
      source?.close();
    }
    return { handled };
  }

  // ---- plumbing -----------------------------------------------------------------------

  /**
   * Acks handled messages for receiveLoop. Deliberately not cancelled by the loop's signal:
   * the messages were handled, so their receipt should land. A transient failure that
   * outlasts the retry budget is not fatal: the ids stay in `handledNotAcked`, the next
   * recv returns them, and they are acked then without being handed again. Returns
   * whether the ack landed.
   */
  private async ackHandled(
    seat: SeatCredentials,
    ids: string[],
    handledNotAcked: Set<string>,
    retry: CallOptions,
  ): Promise<boolean> {
    try {
      await this.ack(seat, ids, retry);
    } catch (error) {
      if (error instanceof DuetError && (isTransient(error) || error.code === "rate_limited")) return false;
      throw error;
    }
    for (const id of ids) handledNotAcked.delete(id);
    return true;
  }

  /**
   * Runs `attempt` until it succeeds, the budget runs out or the caller aborts. Refusals
   * that mean "not now" (429 rate_limited, 503) are always retried: the relay did nothing.
   * Network errors only for calls that are safe to repeat. `onMailboxFull` decides how a
   * send waits for room in the mailbox.
   */
  private async retrying<T>(
    what: string,
    kind: RetryKind,
    options: CallOptions,
    attempt: (requestTimeoutMs: number, attemptNumber: number) => Promise<T>,
    onMailboxFull?: (deadline: Deadline, refusal: DuetError) => Promise<void>,
  ): Promise<T> {
    const deadline = new Deadline(options.timeoutMs ?? this.retryTimeoutMs, what, this.now);
    let failures = 0;
    for (let attemptNumber = 0; ; attemptNumber++) {
      if (options.signal?.aborted) throw new DuetAbortError();
      try {
        return await attempt(Math.max(1, Math.min(this.requestTimeoutMs, deadline.remainingMs())), attemptNumber);
      } catch (error) {
        if (!(error instanceof DuetError)) throw error;
        if (error.code === "rate_limited") {
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

  /**
   * After 429 mailbox_full: polls status until the room holds fewer unacked messages, so
   * the retry has a chance. The mailbox can also be full by bytes with fewer than 8
   * messages; then the first retry goes at once and later ones wait for the count to drop.
   */
  private async waitForMailboxSpace(
    seat: SeatCredentials,
    deadline: Deadline,
    refusal: DuetError,
    watch: MailboxWatch,
    options: CallOptions,
  ): Promise<void> {
    const pendingNow = async () => {
      const status = await this.status(seat, {
        signal: options.signal,
        timeoutMs: Math.max(1, deadline.remainingMs()),
      });
      return status.pending_in + status.pending_out;
    };
    let pending = await pendingNow();
    if (pending < MAX_PENDING_MESSAGES && pending !== watch.pendingAtLastRetry) {
      watch.pendingAtLastRetry = pending;
      return;
    }
    const threshold = Math.min(pending, MAX_PENDING_MESSAGES);
    for (let poll = 0; pending >= threshold; poll++) {
      const delayMs = backoffMs(poll, 500, 2000);
      options.onWait?.({ reason: "mailbox_full", delayMs, attempt: poll });
      await deadline.sleepWithin(delayMs, options.signal, refusal);
      pending = await pendingNow();
    }
    watch.pendingAtLastRetry = pending;
  }

  /** One operation of the endpoint table: its method, path, input placement and answer schema come from there. */
  private call<K extends OperationId>(
    operation: K,
    input: EndpointInput<K>,
    options: { token?: string; signal?: AbortSignal; timeoutMs: number },
  ): Promise<EndpointResponse<K>> {
    const spec: EndpointSpec = ENDPOINTS[operation];
    const placed =
      spec.input?.in === "query" ? { query: input as Record<string, string> } : spec.input ? { body: input } : {};
    return this.request(spec.method, spec.path, spec.response, { ...placed, ...options }) as Promise<
      EndpointResponse<K>
    >;
  }

  private async request<S extends z.ZodType>(
    method: "GET" | "POST",
    path: string,
    schema: S,
    options: {
      body?: unknown;
      query?: Record<string, string>;
      token?: string;
      signal?: AbortSignal;
      timeoutMs: number;
    },
  ): Promise<z.infer<S>> {
    const url = this.baseUrl + path + (options.query ? `?${new URLSearchParams(options.query)}` : "");
    const headers: Record<string, string> = { "User-Agent": USER_AGENT, Accept: "application/json" };
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const failure = (error: unknown): DuetError => {
      if (options.signal?.aborted) return new DuetAbortError(undefined, error);
      if (timeout.aborted)
        return new DuetTimeoutError(`${method} ${path} got no answer within ${options.timeoutMs} ms.`, error);
      // Never quote headers here: the Authorization header holds the token.
      return new DuetNetworkError(`Cannot reach the duet relay at ${this.baseUrl} (${describeCause(error)}).`, error);
    };

    let response: Response;
    let text: string;
    try {
      response = await this.fetchImpl(url, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal,
      });
      text = await response.text();
    } catch (error) {
      throw failure(error);
    }

    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!response.ok) throw errorFromAnswer(response, json, method, path);
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      throw new DuetError(
        "invalid_response",
        `${method} ${path} answered ${response.status} with a body that is not the duet protocol.`,
        {
          status: response.status,
        },
      );
    }
    return parsed.data;
  }
}

/** Opens each message of an encrypted room, in order: decrypted, or refused with the reason. */
function openAll(session: E2eSession, messages: Message[]): (OpenedMessage | RejectedMessage)[] {
  return messages.map((message) => {
    const opened = session.open(message.id, message.text);
    if (!opened.ok)
      return { id: message.id, from: message.from, reason: opened.reason, explanation: opened.explanation };
    const result: OpenedMessage = { id: message.id, from: message.from, text: opened.text, seq: opened.seq };
    if (opened.missing) result.missing = opened.missing;
    return result;
  });
}

interface MailboxWatch {
  pendingAtLastRetry?: number;
}

/** The canonical code when the input is one; otherwise as given, so the relay names the problem. */
function canonicalCode(code: string): string {
  return normalizeRoomCode(code) ?? code;
}

function isTransient(error: DuetError): boolean {
  return error.code === "network" || error.code === "timeout" || error.code === "unavailable";
}

function errorFromAnswer(response: Response, json: unknown, method: string, path: string): DuetError {
  const retryAfter = Number(response.headers.get("retry-after"));
  const retryAfterSeconds =
    Number.isFinite(retryAfter) && retryAfter >= 0 && response.headers.has("retry-after") ? retryAfter : undefined;
  const body = json as { error?: unknown; message?: unknown; ended?: unknown } | undefined;
  if (body && typeof body.error === "string" && isProtocolCode(body.error)) {
    const message = typeof body.message === "string" ? body.message : ERRORS[body.error].message;
    const ended = RoomEnding.safeParse(body.ended);
    return new DuetError(body.error, message, {
      status: response.status,
      retryAfterSeconds,
      ended: ended.success ? ended.data : undefined,
    });
  }
  const code = codeForStatus(response.status);
  return new DuetError(
    code,
    `${method} ${path} answered HTTP ${response.status}${code === "invalid_response" ? " (not a duet error body)" : ""}.`,
    {
      status: response.status,
      retryAfterSeconds,
    },
  );
}

function codeForStatus(status: number): DuetError["code"] {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 429:
      return "rate_limited";
    case 502:
    case 503:
    case 504:
      return "unavailable";
    default:
      return status >= 500 ? "internal" : "invalid_response";
  }
}

function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}

/** The last `size` ids seen, for dedupe. */
class RecentIds {
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
class StreamSource {
  private events?: AsyncGenerator<StreamEvent>;
  private readonly closing = new AbortController();
  private failures = 0;
  private opened = false;
  private fallenBack = false;

  constructor(
    private readonly client: DuetClient,
    private readonly seat: SeatCredentials,
    private readonly only: boolean,
    private readonly signal: AbortSignal | undefined,
    private readonly onWait?: (event: WaitEvent) => void,
  ) {}

  /** Messages that arrived, or undefined when the loop should long-poll instead. */
  async next(): Promise<Message[] | undefined> {
    const signal = this.signal ? AbortSignal.any([this.signal, this.closing.signal]) : this.closing.signal;
    for (;;) {
      if (this.fallenBack) return undefined;
      if (this.signal?.aborted) throw new DuetAbortError();
      this.events ??= this.client.stream(this.seat, { signal });
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
          error.code !== "rate_limited";
        this.failures++;
        if (refused || (!this.opened && !this.only) || this.failures >= 3) {
          // A stream that never worked here (a buffering proxy, an older relay) or keeps
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
