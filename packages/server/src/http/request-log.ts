// One log line and one metrics sample per request: method, route pattern, status and
// duration. The URL is not logged (a query string holds a room code) and neither are
// headers or bodies.
import { performance } from "node:perf_hooks";
import type { Request, RequestHandler, Response } from "express";
import type { Logger } from "../logger.js";
import type { RelayMetrics } from "../metrics.js";
import { UNMATCHED } from "./known-routes.js";

const ROUTE = Symbol("duet.route");
type Labelled = Request & { [ROUTE]?: string };

/**
 * The route pattern of a request refused before its route ran (the User-Agent policy, the
 * general rate limit): labelled with the route it asked for, as a refusal inside the route is.
 */
export function labelRoute(req: Request, route: string): void {
  (req as Labelled)[ROUTE] = route;
}

const STARTED = Symbol("duet.started");
type Timed = Response & { [STARTED]?: number };

export function requestLog(logger: Logger, metrics: RelayMetrics): RequestHandler {
  // One listener for every request, the response being `this` and its request res.req: no
  // closure, context and once-wrapper per request (a waiting recv or a stream holds them for
  // its whole life). On, not once: 'close' comes once.
  function logged(this: Timed): void {
    const req = this.req as Labelled;
    const route: string = req.route?.path ?? req[ROUTE] ?? UNMATCHED;
    const ms = Math.round((performance.now() - (this[STARTED] ?? 0)) * 1000) / 1000;
    const labels = { route, method: req.method, status: String(this.statusCode) };
    metrics.requests.inc(labels);
    metrics.requestSeconds.observe(labels, ms / 1000);
    logger.info(
      {
        method: req.method,
        route,
        status: this.statusCode,
        ms,
        // A long-poll the client abandoned never got an answer.
        ...(this.writableFinished ? {} : { aborted: true }),
      },
      "request",
    );
  }
  return (_req, res, next) => {
    // A float, not hrtime's bigint: no BigInt arithmetic per request.
    (res as Timed)[STARTED] = performance.now();
    res.on("close", logged);
    next();
  };
}
