// DuetClient: the typed SDK. `call` reaches every operation of the endpoint table, typed
// from it; a named method per operation where the call needs more than its wire form (sealing,
// safe retries, waits), plus the flows people want: waitForPeer, receiveLoop, waitUntilRead. What
// is behind it: transport.ts (one request), retry.ts (what is tried again), stream.ts (the
// push stream), receive-loop.ts (handing messages on), encrypted-room.ts (sealing, opening).
import { randomUUID } from "node:crypto";
import {
  ENDPOINTS,
  MAX_WAIT_MS,
  StatusResponse,
  type AckResponse,
  type EndpointInput,
  type EndpointResponse,
  type EndpointSpec,
  type OperationId,
  type CloseResponse,
  type Message,
  type RecvResponse,
  type SendResponse,
  type RoomEnding,
  type StatsResponse,
} from "@duet/protocol";
import { E2eSession, joinUrlWithKey, newRoomKey, roomKeyInText } from "./e2e.js";
import { openAll, textToSend } from "./encrypted-room.js";
import { DuetError } from "./errors.js";
import type {
  CallOptions,
  DuetClientOptions,
  JoinedRoom,
  OpenedMessage,
  OpenedRecvResponse,
  OpenedRoom,
  ReadResult,
  ReceiveLoopOptions,
  RecvOptions,
  RejectedMessage,
  SeatCredentials,
  SendOptions,
  Status,
  StatusOptions,
  StreamEvent,
  StreamOptions,
  WaitForPeerOptions,
  WaitUntilReadOptions,
} from "./options.js";
import { receiveLoop } from "./receive-loop.js";
import { type MailboxWatch, type RetryKind, type RetryPolicy, retrying, waitForMailboxSpace } from "./retry.js";
import { extractRoomCode } from "./room-input.js";
import { type SelftestOptions, type SelftestReport, runSelftest } from "./selftest.js";
import { seatStream } from "./stream.js";
import { Deadline } from "./timing.js";
import { DuetTimeoutError } from "./errors.js";
import { DEFAULT_BASE_URL, Transport, canonicalCode } from "./transport.js";

/** Send budget: mailbox_full waits for the peer to read, which takes longer than a rate limit. */
const DEFAULT_SEND_TIMEOUT_MS = 120_000;
const DEFAULT_WAIT_FOR_PEER_MS = 300_000;
const DEFAULT_WAIT_FOR_READ_MS = 300_000;
/** A message id as the relay mints it: decimal digits. */
const MESSAGE_ID = /^[0-9]{1,15}$/;
/** A held call is answered within its wait plus a small margin; beyond this the connection is dead. */
const RECV_ANSWER_MARGIN_MS = 10_000;

/** The typed duet SDK. Every call sends User-Agent duet/0.1. */
export class DuetClient {
  readonly baseUrl: string;
  readonly retryTimeoutMs: number;
  private readonly transport: Transport;
  private readonly policy: RetryPolicy;
  private readonly now: () => number;

  constructor(options: DuetClientOptions = {}) {
    this.transport = new Transport(options.baseUrl ?? DEFAULT_BASE_URL, options.fetch);
    this.baseUrl = this.transport.baseUrl;
    this.retryTimeoutMs = options.retryTimeoutMs ?? 30_000;
    this.now = options.now ?? Date.now;
    this.policy = {
      requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
      retryTimeoutMs: this.retryTimeoutMs,
      now: this.now,
    };
  }

  // ---- endpoints ----------------------------------------------------------------------

  /**
   * Any operation of the endpoint table by its name, its input (sent as is: a query's values as
   * strings, the code included) and its answer typed from the table:
   * `client.call("ack", { code, ids }, { token })`. The named methods below add what their call
   * needs beyond that; an operation without one is reached here. Retries rate limits and 503s,
   * and a network failure only for calls safe to repeat (reads, and calls the table marks
   * idempotent). In an encrypted room a text for the peer must be sealed first.
   */
  call<K extends OperationId>(
    operation: K,
    input: EndpointInput<K>,
    options: CallOptions & { token?: string } = {},
  ): Promise<EndpointResponse<K>> {
    const spec: EndpointSpec = ENDPOINTS[operation];
    const safe = spec.method === "GET" || spec.tool?.readOnly === true || spec.tool?.idempotent === true;
    // A call that waits is answered within its wait: the request's own timeout allows it.
    const waitMs = Number((input as { wait?: unknown } | undefined)?.wait ?? 0) || 0;
    return this.retrying(
      operation,
      safe ? "refusals-and-network" : "refusals",
      { ...options, timeoutMs: options.timeoutMs ?? this.retryTimeoutMs + waitMs },
      (timeoutMs) =>
        this.transport.call(operation, input, {
          token: options.token,
          signal: options.signal,
          timeoutMs: waitMs > 0 ? Math.max(timeoutMs, waitMs + RECV_ANSWER_MARGIN_MS) : timeoutMs,
        }),
    );
  }

  /** Opens a room and takes seat "a". The token is secret; `share` is what to paste to the peer. */
  async open(options: CallOptions & { e2e?: boolean } = {}): Promise<OpenedRoom> {
    // A network failure is not retried: the room may exist already, and a second open would orphan one.
    const opened = await this.retrying("open", "refusals", options, (timeoutMs) =>
      this.transport.call("open", options.e2e ? { e2e: true } : {}, { signal: options.signal, timeoutMs }),
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
      this.transport.call("join", { code: canonicalCode(room) }, { signal: options.signal, timeoutMs }),
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
   * (default 120 s) with the last refusal. In an encrypted room (`seat.e2e`) the text is
   * sealed here, once: every retry sends the same envelope.
   */
  async send(seat: SeatCredentials, text: string, options: SendOptions = {}): Promise<SendResponse> {
    const wire = textToSend(seat.e2e, text);
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    const body = {
      code: canonicalCode(seat.code),
      text: wire,
      idempotency_key: idempotencyKey,
      ...(options.ack?.length ? { ack: options.ack } : {}),
    };
    const mailbox: MailboxWatch = {};
    const pendingNow = async (deadline: Deadline) => {
      const status = await this.status(seat, {
        signal: options.signal,
        timeoutMs: Math.max(1, deadline.remainingMs()),
      });
      return status.pending_in + status.pending_out;
    };
    return this.retrying(
      "send",
      "refusals-and-network",
      { timeoutMs: DEFAULT_SEND_TIMEOUT_MS, ...options },
      (timeoutMs) => this.transport.call("send", body, { token: seat.token, signal: options.signal, timeoutMs }),
      (deadline, refusal) => waitForMailboxSpace(() => pendingNow(deadline), deadline, refusal, mailbox, options),
    );
  }

  /**
   * Peeks at pending messages for this seat (oldest first), waiting up to waitMs for one. Does
   * not consume; with `ack`, those ids (handled since the last recv) are acked first.
   */
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

  /** recv without opening encrypted texts (receiveLoop opens each as it hands it on). */
  recvRaw(seat: SeatCredentials, options: RecvOptions = {}): Promise<RecvResponse> {
    const waitMs = options.waitMs ?? MAX_WAIT_MS;
    const query = {
      code: canonicalCode(seat.code),
      wait: String(waitMs),
      ...(options.ack?.length ? { ack: options.ack.join(",") } : {}),
    };
    return this.retrying(
      "recv",
      "refusals-and-network",
      { ...options, timeoutMs: options.timeoutMs ?? this.retryTimeoutMs + waitMs },
      (timeoutMs) =>
        this.transport.call("recv", query, {
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
      this.transport.call("ack", body, { token: seat.token, signal: options.signal, timeoutMs }),
    );
  }

  /**
   * Room status for this seat: members, lifetime, whether the peer joined and is active,
   * pending counts, and `unread`: the ids of this seat's messages the peer has not acked
   * (read) yet. With waitMs the relay answers as soon as the peer has joined, or with
   * untilRead as soon as none of this seat's messages up to that id is unread (or the wait
   * runs out, or the room ends).
   */
  status(seat: SeatCredentials, options: StatusOptions = {}): Promise<Status> {
    const waitMs = options.waitMs ?? 0;
    const query: Record<string, string> = { code: canonicalCode(seat.code) };
    if (waitMs > 0) query.wait = String(waitMs);
    if (options.untilRead !== undefined) query.until_read = options.untilRead;
    const { method, path } = ENDPOINTS.status;
    return this.retrying(
      "status",
      "refusals-and-network",
      { ...options, timeoutMs: options.timeoutMs ?? this.retryTimeoutMs + waitMs },
      (timeoutMs) =>
        this.transport.request(method, path, StatusResponse, {
          query,
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
        return await this.transport.call("close", body, { token: seat.token, signal: options.signal, timeoutMs });
      } catch (error) {
        if (attempt > 0 && error instanceof DuetError && error.code === "not_found") return { ok: true as const };
        throw error;
      }
    });
  }

  /** The public tally: totals only, no bodies or tokens. */
  stats(options: CallOptions = {}): Promise<StatsResponse> {
    return this.retrying("stats", "refusals-and-network", options, (timeoutMs) =>
      this.transport.call("stats", undefined, { signal: options.signal, timeoutMs }),
    );
  }

  /**
   * The push stream (GET /v1/stream, Server-Sent Events): this seat's pending messages,
   * oldest first, then each new one as it arrives, until the `end` event (the room's end
   * reason, with `ended`, or gone: the room ended; replaced; shutdown: reconnect). Does not
   * consume: ack as usual; a new stream sends unacked messages again (dedupe by id). Rejects
   * with the relay's DuetError when it refuses the stream, DuetNetworkError when the
   * connection fails or no first byte comes within firstByteTimeoutMs. Raw texts: in an
   * encrypted room open them with the session.
   */
  stream(seat: SeatCredentials, options: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    return seatStream(this.transport, seat, options);
  }

  /**
   * The path self-test (GET /v1/selftest): a long-poll held for waitMs (default 25 s) and
   * the five-tick stream, at once, about 25 s in all. Reports whether the long-poll survived
   * (and how long it lasted when cut) and whether stream events arrived as sent or in one
   * lump, and advises the transport and the wait to use from here. Rejects with the relay's
   * refusal when it cannot run the test (not_found: the URL is not a duet relay).
   */
  selftest(options: SelftestOptions = {}): Promise<SelftestReport> {
    return runSelftest(this.transport, this.now, options);
  }

  // ---- flows --------------------------------------------------------------------------

  /**
   * Long-polls status (GET /v1/status?wait=) until the second seat is claimed and returns
   * that status: the relay answers the moment the peer joins, with no polling in between.
   * Rejects with DuetTimeoutError after timeoutMs (default 5 min), DuetAbortError when
   * signalled, DuetError not_found (with `ended`) when the room ends first.
   */
  async waitForPeer(seat: SeatCredentials, options: WaitForPeerOptions = {}): Promise<Status> {
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
   * Waits until the peer has read (acked) this seat's message `id` and every earlier one:
   * long-polls status with until_read, so the relay answers the moment the ack lands, on
   * any node. Resolves with the ids still unread; also when the room ended with every
   * message of this seat acked (closed, or force-closed abandoning none of them: `ended`
   * says how). Rejects with DuetTimeoutError after timeoutMs (default 5 min), DuetError
   * not_found when the room ended with the message unread (or the relay no longer says how),
   * DuetAbortError when signalled.
   */
  async waitUntilRead(seat: SeatCredentials, id: string, options: WaitUntilReadOptions = {}): Promise<ReadResult> {
    if (!MESSAGE_ID.test(id))
      throw new DuetError("bad_request", `"${id}" is not a message id (1 to 15 digits, as send returns it).`);
    const deadline = new Deadline(
      options.timeoutMs ?? DEFAULT_WAIT_FOR_READ_MS,
      `Waiting for message ${id} to be read`,
      this.now,
    );
    const pollMs = Math.min(Math.max(options.pollMs ?? MAX_WAIT_MS, 1), MAX_WAIT_MS);
    const target = Number(id);
    for (;;) {
      let status: Status;
      try {
        status = await this.status(seat, {
          signal: options.signal,
          onWait: options.onWait,
          waitMs: Math.min(pollMs, Math.max(0, deadline.remainingMs())),
          untilRead: id,
          timeoutMs: Math.max(1, deadline.remainingMs()) + RECV_ANSWER_MARGIN_MS,
        });
      } catch (error) {
        if (error instanceof DuetError && error.code === "not_found" && everyMessageAcked(error.ended))
          return { unread: [], ended: error.ended };
        throw error;
      }
      if (!status.unread.some((unread) => Number(unread) <= target)) return { unread: status.unread };
      if (deadline.expired())
        throw new DuetTimeoutError(
          `Message ${id} was not read within ${deadline.budgetMs} ms (unread: ${status.unread.join(", ")}).`,
        );
    }
  }

  /**
   * Hands each message addressed to this seat to `handle`, one at a time, oldest first,
   * acking it once `handle` resolved; from the push stream, or long-poll recv where the
   * stream cannot work (receive-loop.ts says how).
   */
  receiveLoop(
    seat: SeatCredentials,
    handle: (message: Message) => unknown | Promise<unknown>,
    options: ReceiveLoopOptions = {},
  ): Promise<{ handled: number }> {
    return receiveLoop(this, seat, handle, options);
  }

  private retrying<T>(
    what: string,
    kind: RetryKind,
    options: CallOptions,
    attempt: (requestTimeoutMs: number, attemptNumber: number) => Promise<T>,
    onMailboxFull?: (deadline: Deadline, refusal: DuetError) => Promise<void>,
  ): Promise<T> {
    return retrying(this.policy, what, kind, options, attempt, onMailboxFull);
  }
}

/** How a room ended says every message of the reader's seat was acked: closed (refused while any was unread), or force-closed abandoning none of them. */
function everyMessageAcked(ended: RoomEnding | undefined): boolean {
  return ended?.reason === "closed" || (ended?.reason === "force_closed" && ended.abandoned?.out === 0);
}
