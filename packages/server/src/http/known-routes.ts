// Every route the app serves, with the statuses it can answer: the request counters start at
// zero for each (metrics.ts), so that the first call of a kind shows in rate() and increase().
// Routes come from the app's own router (nothing to keep in step by hand); statuses from the
// OpenAPI document (the endpoint table's errors, the stream's, the documents'), 200 for a
// route it does not describe.
import type { Express } from "express";
import { buildOpenApiDocument } from "@duet/protocol";
import type { KnownRoute } from "../metrics.js";

/** The label of a request no route matched (request-log.ts). */
export const UNMATCHED = "(unmatched)";

interface Layer {
  route?: { path: unknown; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Methods a route really serves: the 405 catch-alls (app.all) register every method; skip them. */
const SERVED = new Set(["get", "post", "delete", "put", "patch"]);

function* routesOf(stack: Layer[]): Generator<{ path: string; method: string }> {
  for (const layer of stack) {
    if (layer.route) {
      const methods = Object.keys(layer.route.methods);
      if (typeof layer.route.path !== "string" || methods.includes("_all") || !methods.every((m) => SERVED.has(m)))
        continue;
      for (const method of methods) yield { path: layer.route.path, method: method.toUpperCase() };
    } else if (layer.handle?.stack) {
      yield* routesOf(layer.handle.stack);
    }
  }
}

export function knownRoutes(app: Express): KnownRoute[] {
  const documented = buildOpenApiDocument().paths as Record<string, Record<string, { responses: object }>>;
  const seen = new Map<string, KnownRoute>();
  const stack = (app as unknown as { router: { stack: Layer[] } }).router.stack;
  for (const { path, method } of routesOf(stack)) {
    const responses = documented[path]?.[method.toLowerCase()]?.responses;
    const statuses = responses ? Object.keys(responses).map(Number) : [200];
    seen.set(`${method} ${path}`, { route: path, method, statuses });
  }
  // What no route matched: the 404 every unknown path gets.
  for (const method of ["GET", "POST"])
    seen.set(`${method} ${UNMATCHED}`, { route: UNMATCHED, method, statuses: [404] });
  return [...seen.values()];
}
