// createApp(deps): the Express application, built from its dependencies and never
// listening by itself (main.ts does that), so tests can build as many as they like.
import { join } from "node:path";
import express, { type Express, type RequestHandler, type Response } from "express";
import { ENDPOINT_METHODS, ROUTES, buildOpenApiDocument, normalizeRoomCode } from "@duet/protocol";
import type { Config } from "./config.js";
import { ApiError, apiError } from "./errors.js";
import type { Logger } from "./logger.js";
import { RelayMetrics } from "./metrics.js";
import {
  WaiterAdmission,
  automaticWaiterCap,
  cgroupMemoryLimit,
  openFileLimit,
  perClientBound,
} from "./realtime/admission.js";
import { OpenStreams } from "./realtime/streams.js";
import { WaitingRecvs } from "./realtime/long-polls.js";
import { TimerWheel } from "./realtime/timer-wheel.js";
import { CachedTally } from "./store/cached-tally.js";
import type { RoomStore } from "./store/room-store.js";
import { baseUrlFor } from "./http/base-url.js";
import { clientAddresses } from "./http/client-address.js";
import { errorHandler } from "./http/error-handler.js";
import { refuseDeclaredTooLarge } from "./http/body.js";
import { PublicDocument } from "./http/public-documents.js";
import { fairTurns } from "./http/fair-turns.js";
import { downloadRoutes } from "./http/downloads.js";
import { renderJoinHtml, renderJoinMarkdown } from "./http/join-page.js";
import { renderLandingHtml, renderLandingMarkdown } from "./http/landing-page.js";
import { rateLimiter } from "./http/rate-limit.js";
import { renderRecipe } from "./http/recipe.js";
import { requestLog } from "./http/request-log.js";
import { knownRoutes } from "./http/known-routes.js";
import { MCP_PATH, mcpRoutes } from "./http/mcp.js";
import { operations, type Operations } from "./http/operations.js";
import { ROOM_PATHS, labelRoomPath, roomRoutes } from "./http/room-routes.js";
import { securityHeaders } from "./http/security-headers.js";
import { HeldSelftests, selftestStream } from "./http/selftest.js";
import { slowReaders, type SlowReaders } from "./http/slow-readers.js";
import { STATS_PAGE_REFRESH_SECONDS, STATS_PATH, renderStatsHtml, wantsStatsPage } from "./http/stats-page.js";
import { streamRoute } from "./http/stream-route.js";
import { userAgentPolicy } from "./http/user-agent.js";
import type { Store } from "express-rate-limit";

export interface AppDeps {
  config: Config;
  store: RoomStore;
  logger: Logger;
  /** Where rate-limit counts live (Redis when on Redis); in memory when absent. */
  rateLimitStores?: { requests: Store; rooms: Store };
  /** Set by main on SIGTERM: readiness turns false. */
  isShuttingDown?: () => boolean;
  /** Node.js process metrics (heap, event loop, ...) in /metrics (metrics-listener.ts); default true. */
  processMetrics?: boolean;
  /** Where the CLI bundle and the skill to serve are; default dist/public beside the built app. */
  publicDir?: string;
}

export interface DuetApp extends Express {
  /** Every waiting recv of this app, for shutdown. */
  locals: Express["locals"] & {
    waitingRecvs: WaitingRecvs;
    streams: OpenStreams;
    admission: WaiterAdmission;
    /** The waiting calls' timer slots. */
    timers: TimerWheel;
    metrics: RelayMetrics;
    operations: Operations;
    slowReaders: SlowReaders;
  };
}

/** Paths whose GET also answers HEAD (every route's but the push stream's). */
const WITH_HEAD = new Set(ROUTES.filter((route) => route.head).map((route) => route.path));
/** A path's Allow header: its one method, and HEAD beside a GET that answers it. */
const allowFor = (path: string, method: string) => (WITH_HEAD.has(path) ? "GET, HEAD" : method);

/** MAX_WAITERS as a count (undefined: no cap); `auto` from this process's limits, logged. */
function resolveWaiterCap(setting: Config["maxWaiters"], logger: AppDeps["logger"]): number | undefined {
  if (setting === "off") return undefined;
  if (setting !== "auto") return setting;
  const { max, from } = automaticWaiterCap({ memoryBytes: cgroupMemoryLimit(), openFiles: openFileLimit() });
  logger.info({ maxWaiters: max ?? "none", from }, "waiter cap");
  return max;
}

export function createApp(deps: AppDeps): DuetApp {
  const { config, store, logger } = deps;
  const app = express() as DuetApp;
  // Every waiting call's timer of this app, in shared slots.
  const timers = new TimerWheel();
  // The most waiters this node holds, in all and per client address (realtime/admission.ts):
  // every kind counts (recvs, statuses, streams, held self-tests).
  const maxWaiters = resolveWaiterCap(config.maxWaiters, logger);
  const admission = new WaiterAdmission(maxWaiters, perClientBound(config.maxWaitersPerClient, maxWaiters));
  app.locals.admission = admission;
  const waitingRecvs = new WaitingRecvs(store, timers, admission, config.maxWaitersPerSeat);
  app.locals.waitingRecvs = waitingRecvs;
  app.locals.timers = timers;
  const streams = new OpenStreams(store, config.wakeRecheckMs, timers, undefined, admission);
  app.locals.streams = streams;
  const selftests = new HeldSelftests(admission);
  const cachedTally = new CachedTally(store, config.statsCacheMs);
  const metrics = new RelayMetrics({
    waitingRecvs: () => waitingRecvs.size,
    openStreams: () => streams.size,
    selftests: () => selftests.size,
    admission,
    tally: () => cachedTally.read(),
    processMetrics: deps.processMetrics,
  });
  app.locals.metrics = metrics;

  app.disable("x-powered-by");
  // ETags on JSON answers that change every call only cost hashing.
  app.set("etag", false);
  app.set("trust proxy", config.trustProxy);
  app.set("query parser", "simple");
  // req.ip is the bare address (no port, no brackets) that every per-address budget counts.
  const forwardedClient = clientAddresses(app, config.trustProxy);

  const baseUrl = baseUrlFor(config.publicUrl);
  // Pages that print the base URL: without PUBLIC_URL it comes from the request's Host (or a
  // trusted proxy's X-Forwarded-Host), which a shared cache may not key them on, so no cache
  // may keep them. With PUBLIC_URL they are the same for everyone; the join page still
  // depends on its room.
  const cachePage = (res: Response, perRoom = false) =>
    void res.set(
      "Cache-Control",
      config.publicUrl === undefined ? "no-store" : perRoom ? "no-cache" : "public, max-age=300",
    );

  const log = requestLog(logger, metrics);
  const publicLimiter = rateLimiter(
    { name: "requests", windowMs: config.rateLimit.windowMs, limit: config.rateLimit.requestsPerWindow },
    deps.rateLimitStores?.requests,
  );
  const roomLimiter: RequestHandler = rateLimiter(
    { name: "rooms", windowMs: config.rateLimit.windowMs, limit: config.rateLimit.roomsPerWindow },
    deps.rateLimitStores?.rooms,
  );
  const ops = operations({
    store,
    waitingRecvs,
    metrics,
    wakeRecheckMs: config.wakeRecheckMs,
    readTally: () => cachedTally.read(),
    mcpMaxWaitMs: config.mcpMaxWaitMs,
    selftests,
  });
  app.locals.operations = ops;
  // The one error middleware, the chain's last (the room routes hand their operations' failures to it).
  const handleError = errorHandler(logger, metrics);
  const rooms = roomRoutes({ operations: ops, baseUrl, roomLimiter, publicLimiter, errorHandler: handleError });
  const userAgents = userAgentPolicy(config.userAgentPolicy);

  app.use(log);
  // One address starts at most a few requests per turn of the event loop (http/fair-turns.ts).
  const trusted = app.get("trust proxy fn") as (address: string, hop: number) => boolean;
  app.use(fairTurns((address) => trusted(address, 0)));
  app.use(securityHeaders());
  // Two Host headers: Node serves the first, a proxy in front may have routed on the other.
  app.use((req, _res, next) => {
    let hosts = 0;
    for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === "host") hosts++;
    next(hosts > 1 ? apiError("bad_request", "Send one Host header.") : undefined);
  });
  // A body declared larger than any the relay takes: refused before a byte of it is read.
  app.use(refuseDeclaredTooLarge);
  // A trusted X-Forwarded-For that names no address is refused before any limit counts it.
  app.use(forwardedClient);
  // Before any route: answers a client leaves unread are counted, dropped after a while, and
  // past a budget its calls are refused (http/slow-readers.ts).
  const unread = slowReaders({ timeoutMs: config.slowReaderTimeoutMs, clientMaxBytes: config.clientUnsentBytesMax });
  app.locals.slowReaders = unread;
  app.use(unread);

  // OPTIONS on an API path, and HEAD on the push stream, answer the JSON 405 of every other
  // method with its Allow, before Express's own OPTIONS answer (200 text/plain "POST") or a
  // HEAD that runs the stream's checks and answers 400 without a body. No CORS either way.
  const onlyMethod: Record<string, string> = { ...ENDPOINT_METHODS, [MCP_PATH]: "POST" };
  // The path as the routes match it: Express ignores case and one trailing slash, so
  // `/V1/JOIN` and `/v1/stream/` reach the same routes and must get the same 405.
  const onlyMethodByLowerCase = new Map(Object.entries(onlyMethod).map(([path, m]) => [path.toLowerCase(), [path, m]]));
  app.use((req, res, next) => {
    if (req.method !== "OPTIONS" && req.method !== "HEAD") return next();
    const found = onlyMethodByLowerCase.get(req.path.toLowerCase().replace(/(.)\/$/, "$1"));
    if (found === undefined) return next();
    const [path, method] = found;
    if (req.method === "HEAD" && (method !== "GET" || WITH_HEAD.has(path))) return next();
    res.set("Allow", allowFor(path, method));
    next(apiError("method_not_allowed", `Use ${method} ${path}.`));
  });

  // ---- room endpoints first (the fewest layers for the hot path): User-Agent policy, then
  // rate limits. Every room call walks the same layers as any other request, so middleware
  // added with app.use above reaches it too. ------------------------------------------
  app.use(ROOM_PATHS, labelRoomPath, userAgents, publicLimiter);
  // /v1/stats for a browser: the same figures as a page (stats-page.ts); JSON goes on to the table's route.
  app.get(STATS_PATH, (req, res, next) => {
    res.vary("Accept");
    if (!wantsStatsPage(req)) return next();
    // The page prints the base URL: from the request's Host without PUBLIC_URL.
    if (baseUrl.fromRequest) res.set("Cache-Control", "no-store");
    publicLimiter(req, res, (limited?: unknown) => {
      if (limited) return next(limited);
      ops.stats(undefined as never, { tokenHash: "", baseUrl: baseUrl(req) }).then(
        (stats) => void res.type("html").send(renderStatsHtml(baseUrl(req), stats)),
        (error: unknown) => {
          if (!(error instanceof ApiError) || error.code !== "unavailable") return next(error);
          metrics.countFailure(error);
          res.status(503).set("Retry-After", String(STATS_PAGE_REFRESH_SECONDS)).type("html");
          res.send(renderStatsHtml(baseUrl(req), undefined));
        },
      );
    });
  });
  // The self-test's stream mode answers an event stream; its longpoll mode is the table's route.
  app.use(selftestStream(publicLimiter, selftests));
  app.use(rooms.router);
  app.use(streamRoute(streams, roomLimiter));

  // ---- MCP (Streamable HTTP, stateless): any User-Agent, same per-IP limits -------------
  app.use(
    mcpRoutes({
      operations: ops,
      baseUrl,
      logger,
      metrics,
      bindHost: config.host,
      publicUrl: config.publicUrl,
      publicLimiter,
      roomLimiter,
      maxWaitMs: config.mcpMaxWaitMs,
    }),
  );

  // ---- public: any User-Agent ----------------------------------------------------------
  app.get("/healthz", (_req, res) => void res.json({ ok: true }));
  app.get("/readyz", async (_req, res) => {
    // Whether this node can serve: its store answers and it is not stopping. Never how many
    // waiters it holds: any client can fill the cap, and readiness strangers can flip would
    // let them empty the load balancer (a full node refuses only new waiters, 503).
    const ready = !deps.isShuttingDown?.() && (await store.isReady());
    res.status(ready ? 200 : 503).json({ ready });
  });
  // The public documents: rendered once per base URL and variant, compressed once
  // (http/public-documents.ts), and limited per address like every other call.
  const recipe = new PublicDocument("text/markdown; charset=utf-8", (base) => renderRecipe(base, config));
  const openApi = new PublicDocument("application/json; charset=utf-8", (base) =>
    JSON.stringify(buildOpenApiDocument(base)),
  );
  const landingSettings = (base: string) => ({
    baseUrl: base,
    idleMinutes: config.roomIdleMs / 60_000,
    maxMinutes: config.roomMaxMs / 60_000,
  });
  const landingHtml = new PublicDocument("text/html; charset=utf-8", (base) =>
    renderLandingHtml(landingSettings(base)),
  );
  const landingMarkdown = new PublicDocument("text/markdown; charset=utf-8", (base) =>
    renderLandingMarkdown(landingSettings(base)),
  );
  app.get("/v1/api", publicLimiter, (req, res) => {
    // The base URL first: a refused Host answers the JSON 400, not JSON labelled as markdown.
    const base = baseUrl(req);
    cachePage(res);
    recipe.send(req, res, base);
  });
  app.get("/v1/openapi.json", publicLimiter, (req, res) => {
    const base = baseUrl(req);
    cachePage(res);
    openApi.send(req, res, base);
  });
  app.get("/", publicLimiter, (req, res) => {
    const base = baseUrl(req);
    cachePage(res);
    res.vary("Accept");
    const page = req.accepts(["text/markdown", "text/html"]) === "text/html" ? landingHtml : landingMarkdown;
    page.send(req, res, base);
  });
  app.use(downloadRoutes(deps.publicDir ?? join(__dirname, "public"), publicLimiter, baseUrl));
  // The same page for every well-formed code (join-page.ts): no store lookup, nothing that
  // tells a live room from an unknown code.
  app.get("/join/:code", publicLimiter, (req, res, next) => {
    const code = normalizeRoomCode(req.params.code as string);
    if (!code) return next(apiError("not_found", "This is not a duet room code."));
    const base = baseUrl(req);
    cachePage(res, true);
    res.vary("Accept");
    if (req.accepts(["text/markdown", "text/html"]) === "text/html")
      return void res.type("html").send(renderJoinHtml(base, code));
    res.type("text/markdown; charset=utf-8").send(renderJoinMarkdown(base, code));
  });

  // ---- everything else -----------------------------------------------------------------
  for (const [path, method] of Object.entries(ENDPOINT_METHODS)) {
    app.all(path, (_req, res, next) => {
      res.set("Allow", allowFor(path, method));
      next(apiError("method_not_allowed", `Use ${method} ${path}.`));
    });
  }
  app.use((_req, _res, next) => next(apiError("not_found", "No such endpoint. The API is described at GET /v1/api.")));
  app.use(handleError);
  metrics.startRoutesAtZero(knownRoutes(app));
  return app;
}
