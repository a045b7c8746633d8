// The error catalogue: every error the API can answer, its HTTP status and what a
// client should do about it. The server's error middleware and the recipe both read it.

export const ERRORS = {
  bad_request: {
    status: 400,
    message: "The request is malformed.",
    remedy: "Fix the request as the message says; do not retry it unchanged.",
  },
  too_large: {
    status: 400,
    message: "The text is larger than 2,097,152 UTF-8 bytes.",
    remedy: "Split the text, or publish it at a URL the peer can fetch and send the URL.",
  },
  e2e_required: {
    status: 400,
    message: "This room is end-to-end encrypted: the text must be a duet-e2e:v1 envelope.",
    remedy:
      "Encrypt the text with the room key (the #k= part of the join address) before sending: duet send does it, and GET /v1/api shows how with openssl.",
  },
  unauthorized: {
    status: 401,
    message: "A valid seat token is required.",
    remedy: "Send 'Authorization: Bearer <token>' with the token that open or join returned for this room.",
  },
  forbidden: { status: 403, message: "This User-Agent is not accepted.", remedy: "Send 'User-Agent: duet/0.1'." },
  not_found: {
    status: 404,
    message: "No such room: the code is unknown, or the room was closed or has expired.",
    remedy: "Stop using this code; open a new room if you still need one.",
  },
  method_not_allowed: {
    status: 405,
    message: "This method is not allowed on this path.",
    remedy: "Use the method the API documents for this path.",
  },
  request_timeout: {
    status: 408,
    message: "The request took too long to arrive.",
    remedy: "Send each request at once, on a new connection: this one is closed.",
  },
  full: { status: 409, message: "Both seats of this room are taken.", remedy: "Ask the opener for a new room." },
  unread: {
    status: 409,
    message:
      "The room still has unacknowledged messages: yours the peer has not read yet, or the peer's you have not acked.",
    remedy:
      "Ack the peer's messages you handled (status: pending_in), wait until yours are read (status with wait and until_read=<your last id>), or close with force: true to abandon them.",
  },
  idempotency_conflict: {
    status: 409,
    message: "This idempotency_key was already used with a different text.",
    remedy: "Use a new idempotency_key for a new text.",
  },
  mailbox_full: {
    status: 429,
    message: "The room holds 8 unacknowledged messages or 2 MiB of unacknowledged text.",
    remedy: "Wait for the peer to ack, then retry with the same idempotency_key.",
  },
  rate_limited: {
    status: 429,
    message: "Too many requests from this address.",
    remedy: "Wait Retry-After seconds, then retry the same call (same idempotency_key on send).",
  },
  too_many_rooms: {
    status: 429,
    message: "This address already holds as many open rooms as it may.",
    remedy: "Close rooms you no longer use, or open again after Retry-After seconds, when the oldest has ended.",
  },
  too_many_waiters: {
    status: 429,
    message: "This address already holds as many waiting calls on this relay node as it may.",
    remedy:
      "Let one of your waiting recvs, statuses or streams end (or cancel it) before you start another; one waiting call per seat is enough. Retry after Retry-After seconds.",
  },
  insufficient_storage: {
    status: 507,
    message: "The relay holds all the rooms and text it can right now.",
    remedy: "Retry after Retry-After seconds; on send reuse the idempotency_key.",
  },
  internal: {
    status: 500,
    message: "The relay failed unexpectedly.",
    remedy: "Retry later; on send reuse the idempotency_key.",
  },
  unavailable: {
    status: 503,
    message: "The relay's store is unreachable.",
    remedy: "Retry after a few seconds; on send reuse the idempotency_key.",
  },
} as const satisfies Record<string, { status: number; message: string; remedy: string }>;

export type ErrorCode = keyof typeof ERRORS;
export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

/** The body of every error answer. */
export interface ErrorBody {
  error: ErrorCode;
  message: string;
}
