// Clients that do not read their answers: Node has no write timeout once a request is read. What
// a socket still holds of an ended answer ('prefinish' until 'finish' or 'close') counts against
// its client (clientKey, the rate limits' key): an answer not taken within timeoutMs is dropped
// with its connection, and past maxBytes the client gets 429 rate_limited. One client pins at
// most maxBytes plus one answer per node; a client that reads costs one listener and one Map
// lookup. docs/security.md, "Clients that do not read their answers".
import type { RequestHandler, Response } from "express";
import { ApiError } from "../errors.js";
import { clientKey } from "./rate-limit.js";

export interface SlowReaderSettings {
  /** An answer the client has not taken this long after it ended is dropped with its connection. */
  timeoutMs: number;
  /** Untaken bytes one client may hold on this node before its calls answer 429. */
  clientMaxBytes: number;
}

export interface SlowReaders extends RequestHandler {
  /** Bytes of ended answers the client's sockets still hold (for tests and metrics). */
  unsentBytes(key: string): number;
}

export function slowReaders(settings: SlowReaderSettings): SlowReaders {
  const unsent = new Map<string, number>();
  const retryAfterSeconds = Math.max(1, Math.ceil(settings.timeoutMs / 1000));

  const add = (key: string, bytes: number) => {
    const total = (unsent.get(key) ?? 0) + bytes;
    if (total > 0) unsent.set(key, total);
    else unsent.delete(key);
  };

  // One listener for every response, the response being `this`: no closure and once-wrapper
  // per request (a waiting recv or a stream holds them for its whole life). On, not once:
  // 'prefinish' comes once.
  function ended(this: Response): void {
    const socket = this.socket;
    const bytes = socket?.writableLength ?? 0;
    if (!socket || bytes === 0) return;
    const key = clientKey(this.req);
    // Over its budget already (answers that ended together got past the check before any
    // was counted): this one is dropped now, so the client never holds more than one answer
    // past the budget.
    if ((unsent.get(key) ?? 0) > settings.clientMaxBytes) return void socket.destroy();
    add(key, bytes);
    let timer: NodeJS.Timeout | undefined = setTimeout(() => socket.destroy(), settings.timeoutMs);
    timer.unref();
    const settle = () => {
      if (timer === undefined) return;
      clearTimeout(timer);
      timer = undefined;
      add(key, -bytes);
      this.off("finish", settle);
      this.off("close", settle);
    };
    this.once("finish", settle);
    this.once("close", settle);
  }

  const middleware: RequestHandler = (req, res, next) => {
    res.on("prefinish", ended);
    if (unsent.size > 0 && (unsent.get(clientKey(req)) ?? 0) > settings.clientMaxBytes) {
      const error = new ApiError(
        "rate_limited",
        "This address has answers waiting on this relay that it has not read: read them (or close those connections), then retry after Retry-After seconds.",
      );
      error.retryAfterSeconds = retryAfterSeconds;
      return next(error);
    }
    next();
  };
  return Object.assign(middleware, { unsentBytes: (key: string) => unsent.get(key) ?? 0 });
}
