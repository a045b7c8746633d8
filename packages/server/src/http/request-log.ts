// One log line and one metrics sample per request: method, route pattern, status and
// duration. The URL is not logged (a query string holds a room code) and neither are
// headers or bodies.
import { performance } from "node:perf_hooks";
import type { Request, RequestHandler } from "express";
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

export function requestLog(logger: Logger, metrics: RelayMetrics): RequestHandler {
  return (req, res, next) => {
    // A float, not hrtime's bigint: no BigInt arithmetic per request.
    const started = performance.now();
    res.once("close", () => {
      const route: string = req.route?.path ?? (req as Labelled)[ROUTE] ?? UNMATCHED;
      const ms = Math.round((performance.now() - started) * 1000) / 1000;
      const labels = { route, method: req.method, status: String(res.statusCode) };
      metrics.requests.inc(labels);
      metrics.requestSeconds.observe(labels, ms / 1000);
      logger.info(
        {
          method: req.method,
          route,
          status: res.statusCode,
          ms,
          // A long-poll the client abandoned never got an answer.
          ...(res.writableFinished ? {} : { aborted: true }),
        },
        "request",
      );
    });
    next();
  };
}
