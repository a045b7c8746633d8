// Typed errors of the duet client: one class for what the relay answered, subclasses for
// what went wrong before an answer (network, timeout, cancellation, a malformed answer).
import { ERRORS, type ErrorCode, type RoomEnding } from "@duet/protocol";

/** Codes the client itself produces when there is no relay answer to quote. */
export type ClientErrorCode = "network" | "timeout" | "aborted" | "invalid_response" | "e2e";

export type DuetErrorCode = ErrorCode | ClientErrorCode;

const CLIENT_REMEDIES: Record<ClientErrorCode, string> = {
  network: "Check that the relay is reachable (DUET_URL / --base-url), then retry.",
  timeout: "The operation ran out of time; retry, or allow more time.",
  aborted: "The operation was cancelled.",
  invalid_response: "The relay answered something that is not the duet protocol; check the base URL.",
  e2e: "A message of this end-to-end encrypted room was refused (never shown as text), or the room key is missing; see docs/encryption.md.",
};

/**
 * Every failure of the SDK. `code` is an error code of the protocol's catalogue when the
 * relay answered (`status` is then its HTTP status), or a ClientErrorCode when it did not
 * (`status` is then undefined).
 */
export class DuetError extends Error {
  readonly code: DuetErrorCode;
  readonly status: number | undefined;
  /** Seconds the relay asked us to wait (429 Retry-After), when it said. */
  readonly retryAfterSeconds: number | undefined;
  /**
   * How the room ended, when the relay said (a 404 not_found answered to one of the
   * room's seats, for a while after the end; docs/room-endings.md).
   */
  readonly ended: RoomEnding | undefined;

  constructor(
    code: DuetErrorCode,
    message: string,
    options: { status?: number; retryAfterSeconds?: number; cause?: unknown; ended?: RoomEnding } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DuetError";
    this.code = code;
    this.status = options.status;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.ended = options.ended;
  }

  /** What a caller (or a person) should do about this error. */
  get remedy(): string {
    return isProtocolCode(this.code) ? ERRORS[this.code].remedy : CLIENT_REMEDIES[this.code];
  }
}

/** The relay could not be reached, or the connection broke before an answer. */
export class DuetNetworkError extends DuetError {
  constructor(message: string, cause?: unknown) {
    super("network", message, { cause });
    this.name = "DuetNetworkError";
  }
}

/** A bounded operation (a request, a send with retries, waitForPeer) ran out of time. */
export class DuetTimeoutError extends DuetError {
  constructor(message: string, cause?: unknown) {
    super("timeout", message, { cause });
    this.name = "DuetTimeoutError";
  }
}

/** The caller's AbortSignal fired. */
export class DuetAbortError extends DuetError {
  constructor(message = "The operation was cancelled.", cause?: unknown) {
    super("aborted", message, { cause });
    this.name = "DuetAbortError";
  }
}

export function isProtocolCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERRORS, code);
}
