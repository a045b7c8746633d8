// One log line per request: method, route pattern, status and duration. The URL is not
// logged (a query string holds a room code) and neither are headers or bodies.
import type { RequestHandler } from "express";
import type { Logger } from "../logger.js";

export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.once("close", () => {
      logger.info(
        {
          method: req.method,
          route: req.route?.path ?? "(unmatched)",
          status: res.statusCode,
          ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
          // A long-poll the client abandoned never got an answer.
          ...(res.writableFinished ? {} : { aborted: true }),
        },
        "request",
      );
    });
    next();
  };
}
