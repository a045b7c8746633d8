// The server's one error type. Every refusal is an ApiError carrying a code from the
// protocol's catalogue; the error middleware turns it into {"error","message"}.
import { ERRORS, type ErrorCode } from "@duet/protocol";

export class ApiError extends Error {
  readonly status: number;
  /** Seconds a client should wait before retrying (429 and 503). */
  retryAfterSeconds?: number;

  constructor(
    readonly code: ErrorCode,
    message: string = ERRORS[code].message,
  ) {
    super(message);
    this.name = "ApiError";
    this.status = ERRORS[code].status;
  }
}

export const apiError = (code: ErrorCode, message?: string) => new ApiError(code, message);
