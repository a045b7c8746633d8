// The one error middleware: every failure becomes {"error","message"} with the catalogue's
// status. Unknown failures are 500 internal, logged here and never described to clients.
import type { ErrorRequestHandler } from "express";
import { ApiError, apiError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { RelayMetrics } from "../metrics.js";

/** Express's own 4xx errors (a path that cannot be percent-decoded, say) are bad requests. */
function clientError(error: unknown): ApiError | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const status =
    (error as { status?: unknown; statusCode?: unknown }).status ?? (error as { statusCode?: unknown }).statusCode;
  if (typeof status === "number" && status >= 400 && status < 500)
    return apiError("bad_request", "The request's path or query is malformed.");
  return undefined;
}

export function errorHandler(logger: Logger, metrics: RelayMetrics): ErrorRequestHandler {
  return (error, req, res, _next) => {
    let failure = error instanceof ApiError ? error : clientError(error);
    if (!failure) {
      logger.error({ err: error, method: req.method, route: req.route?.path }, "internal error");
      failure = apiError("internal");
    }
    metrics.countFailure(failure);
    if (res.headersSent) return void res.destroy();
    // Every 429 and 503 says when to come back (docs/protocol.md §12).
    const retryAfter = failure.retryAfterSeconds ?? (failure.status === 429 || failure.status === 503 ? 1 : undefined);
    if (retryAfter !== undefined) res.set("Retry-After", String(retryAfter));
    res
      .status(failure.status)
      .json({ error: failure.code, message: failure.message, ...(failure.ended ? { ended: failure.ended } : {}) });
  };
}
