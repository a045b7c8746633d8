// Security headers. HTML pages (the landing page, the join page) and everything else a
// browser may render get helmet's full set. The API's JSON, NDJSON and SSE answers get a
// fixed minimal set instead: most of helmet's headers only mean something for a document a
// browser renders (a script policy, cross-origin isolation, DNS prefetching, IE downloads,
// Flash policies), and the thirteen of them were about 4 % of a busy node's CPU
// (packages/bench/PROFILE.md). docs/security.md lists which answer gets which.
import type { RequestHandler, Response } from "express";
import helmet from "helmet";
import { ENDPOINT_METHODS } from "@duet/protocol";
import { wantsStatsPage } from "./stats-page.js";

/** What every API answer carries. */
export const API_HEADERS: readonly (readonly [string, string])[] = [
  // A JSON answer opened as a page runs nothing, loads nothing and cannot be framed (this
  // also covers X-Frame-Options in every current browser).
  ["Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"],
  // Other sites cannot pull an answer into their page with a no-cors load.
  ["Cross-Origin-Resource-Policy", "same-origin"],
  ["Referrer-Policy", "no-referrer"],
  // As helmet sets it (it always has on this relay): behind TLS, browsers stay on HTTPS.
  ["Strict-Transport-Security", "max-age=31536000; includeSubDomains"],
  ["X-Content-Type-Options", "nosniff"],
];

/** The API's paths: the endpoint table's and the push stream's, MCP, probes, and the OpenAPI document. */
export const API_PATHS: ReadonlySet<string> = new Set([
  ...Object.keys(ENDPOINT_METHODS),
  "/mcp",
  "/healthz",
  "/readyz",
  "/v1/openapi.json",
]);

export function setApiHeaders(res: Response): void {
  for (const [name, value] of API_HEADERS) res.setHeader(name, value);
}

/** Sets the API set on an API path (as written in the table), helmet's full set on any other and on the stats page. */
export function securityHeaders(): RequestHandler {
  // Without upgrade-insecure-requests: a relay reached over plain HTTP at a network address
  // (a LAN, a cluster without TLS) would send the browser to https:// on its own links,
  // where nothing answers. Behind TLS it changes nothing: the pages' links are same-origin.
  const full = helmet({ contentSecurityPolicy: { directives: { upgradeInsecureRequests: null } } });
  return (req, res, next) => {
    if (!API_PATHS.has(req.path) || wantsStatsPage(req)) return full(req, res, next);
    setApiHeaders(res);
    next();
  };
}
