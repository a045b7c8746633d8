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

/** Methods a route really serves; a route with any other is a 405 catch-all (app.all). */
const SERVED = new Set(["get", "post", "delete", "put", "patch"]);

interface Found {
  path: string;
  /** Upper case; empty for a 405 catch-all. */
  methods: string[];
}

function* routesOf(stack: Layer[]): Generator<Found> {
  for (const layer of stack) {
    if (layer.route) {
      if (typeof layer.route.path !== "string") continue;
      const methods = Object.keys(layer.route.methods);
      const catchAll = methods.includes("_all") || !methods.every((m) => SERVED.has(m));
      yield { path: layer.route.path, methods: catchAll ? [] : methods.map((m) => m.toUpperCase()) };
    } else if (layer.handle?.stack) {
      yield* routesOf(layer.handle.stack);
    }
  }
}

export function knownRoutes(app: Express): KnownRoute[] {
  const documented = buildOpenApiDocument().paths as Record<string, Record<string, { responses: object }>>;
  const known = new Map<string, KnownRoute>();
  const served = new Map<string, Set<string>>();
  const catchAlls = new Set<string>();
  const stack = (app as unknown as { router: { stack: Layer[] } }).router.stack;
  for (const { path, methods } of routesOf(stack)) {
    if (methods.length === 0) catchAlls.add(path);
    for (const method of methods) {
      const responses = documented[path]?.[method.toLowerCase()]?.responses;
      const statuses = responses ? Object.keys(responses).map(Number) : [200];
      known.set(`${method} ${path}`, { route: path, method, statuses });
      served.set(path, (served.get(path) ?? new Set()).add(method));
    }
  }
  // The 405 of the other usual method on a path that has a catch-all (GET /v1/send, POST /v1/recv).
  for (const path of catchAlls) {
    for (const method of ["GET", "POST"]) {
      if (!served.get(path)?.has(method)) known.set(`${method} ${path}`, { route: path, method, statuses: [405] });
    }
  }
  // What no route matched: the 404 every unknown path gets.
  for (const method of ["GET", "POST"])
    known.set(`${method} ${UNMATCHED}`, { route: UNMATCHED, method, statuses: [404] });
  return [...known.values()];
}
