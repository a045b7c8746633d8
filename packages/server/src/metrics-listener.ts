// The operator listener: /metrics on a port of its own (METRICS_PORT, METRICS_HOST), so the
// public port, the one a load balancer routes, never serves it (it answers 404 there). A
// render costs the event loop a walk over every series; it is made at most once per
// METRICS_CACHE_MS (1 s), and scrapes that arrive meanwhile share it; one connection is
// answered at most once a second (metricsHandler), so a scrape flood on keep-alive
// connections cannot take the event loop from the public port.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Registry } from "prom-client";

export const METRICS_PATH = "/metrics";

/** How long one render is served by default (METRICS_CACHE_MS): at most one render per second per node. */
export const RENDER_TTL_MS = 1000;

/** A render of a registry, made at most once per `ttlMs`; concurrent callers share one. */
export class CachedRender {
  private last?: { at: number; text: Promise<string> };
  /** Renders made so far (each a walk over every series): what a flood of scrapes must not multiply. */
  renders = 0;

  constructor(
    private readonly registry: Pick<Registry, "metrics">,
    private readonly ttlMs = RENDER_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** The render in use now, if it is still fresh: when it was made and its text. */
  private fresh(now: number) {
    return this.last && now - this.last.at < this.ttlMs && now >= this.last.at ? this.last : undefined;
  }

  /** The render to serve now (a new one when the last is stale) and when it was made. */
  current(): { at: number; text: Promise<string> } {
    const now = this.now();
    const fresh = this.fresh(now);
    if (fresh) return fresh;
    this.renders++;
    const entry = { at: now, text: this.registry.metrics() };
    this.last = entry;
    // A failed render is not kept: the next scrape tries again.
    entry.text.catch(() => {
      if (this.last === entry) this.last = undefined;
    });
    return entry;
  }

  read(): Promise<string> {
    return this.current().text;
  }

  /** The clock renders are timed by (Date.now unless a test gives another). */
  clock(): number {
    return this.now();
  }
}

/** A connection is answered at most once per this long (or per METRICS_CACHE_MS when shorter). */
export const ANSWER_PACE_MS = 1000;

/**
 * The listener's request handler: GET or HEAD /metrics (any query), 404 or 405 otherwise.
 *
 * One connection is answered at most once per `paceMs` (1 s, or the cache period when it is
 * shorter): a scrape that comes sooner on the same connection waits for its turn. Prometheus
 * scrapes every 15 s (at most every second) and never waits; without the pace, a few
 * keep-alive connections asking back to back took every free moment of the event loop the
 * public port shares, each answer a copy of the same render. With it, a flood of N
 * connections costs N answers a second.
 */
export function metricsHandler(registry: Registry, render = new CachedRender(registry), paceMs = ANSWER_PACE_MS) {
  const answeredAt = new WeakMap<Socket, number>();
  return (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "").split("?")[0];
    const answer = (status: number, type: string, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "Content-Type": type, "Cache-Control": "no-store", ...headers });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    if (path !== METRICS_PATH) return answer(404, "text/plain; charset=utf-8", "Only /metrics is served here.\n");
    if (req.method !== "GET" && req.method !== "HEAD")
      return answer(405, "text/plain; charset=utf-8", "Use GET /metrics.\n", { Allow: "GET, HEAD" });
    let timer: NodeJS.Timeout | undefined;
    const respond = () => {
      if (res.destroyed) return;
      const last = answeredAt.get(req.socket);
      const wait = last === undefined ? 0 : last + paceMs - render.clock();
      // Re-checked when the timer fires: the render's clock (Date.now) and the timers' differ.
      if (wait > 0) {
        timer = setTimeout(respond, wait);
        return;
      }
      answeredAt.set(req.socket, render.clock());
      render.read().then(
        (text) => answer(200, registry.contentType, text),
        () => answer(500, "text/plain; charset=utf-8", "The metrics could not be rendered.\n"),
      );
    };
    res.once("close", () => clearTimeout(timer));
    respond();
  };
}

/** The listener, not yet listening. */
export function createMetricsServer(registry: Registry, cacheMs = RENDER_TTL_MS): Server {
  const server = createServer(
    metricsHandler(registry, new CachedRender(registry, cacheMs), Math.min(cacheMs, ANSWER_PACE_MS)),
  );
  // Prometheus keeps its connection between scrapes (every 15 s by default).
  server.keepAliveTimeout = 65_000;
  return server;
}
