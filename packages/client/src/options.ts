// The SDK's option and result types, shared by DuetClient and the modules behind it.
import type {
  JoinResponse,
  Message,
  MessageTextField,
  OpenResponse,
  RoomEnding,
  StatusResponse,
  StreamEventData,
} from "@duet/protocol";
import type { E2eRejectReason, E2eSession } from "./e2e.js";

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
/** A message of an encrypted room that was refused: its fields without those that carry text, which is never shown. */
export type RejectedMessage = Omit<Message, MessageTextField> & {
  reason: E2eRejectReason;
  explanation: string;
};
export type OpenedRecvResponse = { messages: OpenedMessage[]; rejected?: RejectedMessage[] };

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
  /**
   * Ids of messages this seat handled (e.g. the one this text answers): acked before the text
   * is sent, as ack() would, saving that call; they stay acked if the send is then refused.
   */
  ack?: string[];
}

export interface RecvOptions extends CallOptions {
  /** Milliseconds the relay may hold the call open waiting for a message, 0..25000. Default 25000. */
  waitMs?: number;
  /**
   * Ids of messages this seat handled since the last recv: acked before the relay reads or
   * waits, as ack() would, so the answer no longer holds them (the loop needs no ack call).
   */
  ack?: string[];
}

export interface WaitForPeerOptions extends CallOptions {
  /** Longest wait of one long-poll (GET /v1/status?wait=), 1..25000 ms. Default 25000. */
  pollMs?: number;
}

export interface StatusOptions extends CallOptions {
  /** Milliseconds the relay may hold the call open until the peer joins (or, with untilRead, until that is read), 0..25000. Default 0. */
  waitMs?: number;
  /** With waitMs: answer as soon as none of this seat's messages up to this id is unread (read receipts). */
  untilRead?: string;
}

/**
 * status's answer: `unread` lists the ids of this seat's own messages the peer has not
 * acked yet, oldest first.
 */
export type Status = StatusResponse;

export interface WaitUntilReadOptions extends CallOptions {
  /** Longest wait of one long-poll (GET /v1/status?wait=&until_read=), 1..25000 ms. Default 25000. */
  pollMs?: number;
}

/** waitUntilRead's answer: the message was read. */
export interface ReadResult {
  /** This seat's messages still unread (all later than the one waited for). */
  unread: string[];
  /** Set when the room ended with every message of this seat acked (closed, or force-closed abandoning none of them). */
  ended?: RoomEnding;
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
  /** Told when the peer has read (acked) messages this seat sent: the read receipts of the push stream (not in long-poll). */
  onRead?: (ids: string[]) => void;
  /** Encrypted rooms: told about a refused message, which is then acked (dropped). Without it the loop stops with DuetE2eError. */
  onRejected?: (rejected: RejectedMessage) => void;
}

/** One event of the push stream: a message addressed to this seat, a read receipt, or the stream's end and why. */
export type StreamEvent =
  | { event: "open" }
  | { event: "message"; message: Message }
  /** The peer acked (read) these messages of this seat. Ids only, never text; not replayed after a reconnect (status has `unread`). */
  | ({ event: "read" } & StreamEventData<"read">)
  /** `reason` is one of STREAM_END_REASONS from this relay, or one a later relay adds ("unknown" when none came). */
  | ({ event: "end"; reason: string } & Omit<StreamEventData<"end">, "reason">);

export interface StreamOptions {
  /** Closes the stream; iteration then ends with DuetAbortError. */
  signal?: AbortSignal;
  /** Resume after this message id. */
  after?: string;
  /** The relay writes a first byte at once; without it within this long the stream counts as broken (a buffering proxy). Default 5000. */
  firstByteTimeoutMs?: number;
}
