// The server's one error type. Every refusal is an ApiError carrying a code from the
// protocol's catalogue; the error middleware turns it into {"error","message"}.
import { ERRORS, describeRoomEnding, type ErrorCode, type RoomEnding, type Seat } from "@duet/protocol";

export class ApiError extends Error {
  readonly status: number;
  /** Seconds a client should wait before retrying (429 and 503). */
  retryAfterSeconds?: number;
  /** How the room ended: only on a 404 answered to one of the room's seats. */
  ended?: RoomEnding;
  /** A 503 because Redis is full (an OOM reply under `noeviction`), not unreachable. */
  storeFull?: true;

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

/** 404 for one of an ended room's seats: the reason, in the body and in the sentence. */
export function roomEndedError(ended: RoomEnding, seat: Seat): ApiError {
  const error = new ApiError(
    "not_found",
    `${describeRoomEnding(ended, seat)} Its code cannot be used again; open a new room if you still need one.`,
  );
  error.ended = ended;
  return error;
}

/** 429 too_many_rooms: the owner's oldest room frees a place in `retryMs`. */
export function tooManyRoomsError(limit: number, retryMs: number): ApiError {
  const error = new ApiError(
    "too_many_rooms",
    `This address already holds ${limit} open rooms, the most it may: close rooms you no longer use, or open again after Retry-After seconds.`,
  );
  error.retryAfterSeconds = Math.max(1, Math.ceil(retryMs / 1000));
  return error;
}

/** 507 insufficient_storage: the in-process store's budget is spent. */
export function storeFullError(): ApiError {
  const error = new ApiError("insufficient_storage");
  error.retryAfterSeconds = 60;
  return error;
}
