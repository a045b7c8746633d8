// The REST routes, generated from the endpoint table (@duet/protocol's ENDPOINTS): each
// operation's method, path, body or query validation and auth come from its entry; what it
// does is in operations.ts, shared with the MCP tools.
import { Router, type ErrorRequestHandler, type Request, type RequestHandler, type Response } from "express";
import { ENDPOINTS, OPERATION_IDS, ROUTES, type EndpointSpec, type OperationId } from "@duet/protocol";
import { seatToken } from "./auth.js";
import { hashSeatToken } from "../store/credentials.js";
import { labelRoute } from "./request-log.js";
import { jsonBody } from "./body.js";
import type { Operation, Operations } from "./operations.js";
import { type ClientGone, goneWhenClosed } from "../realtime/client-gone.js";
import { clientKey } from "./rate-limit.js";
import { renderedJson } from "./rendered.js";
import { parseInput } from "./validate.js";
import { ApiError } from "../errors.js";

export interface RoomRouteDeps {
  operations: Operations;
  baseUrl: (req: Request) => string;
  /** Applied to open and join on top of the general limit. */
  roomLimiter: RequestHandler;
  /** The general per-IP limit; room paths get it in app.ts, the others here. */
  publicLimiter: RequestHandler;
  /**
   * The app's error middleware, the last one of the chain: a failed operation's error goes
   * straight to it, which is where `next(error)` would take it (see the handler below).
   */
  errorHandler: ErrorRequestHandler;
}

export interface RoomRoutes {
  /** Every operation's route. */
  router: Router;
}

const noNext = () => undefined;

export function roomRoutes({
  operations,
  baseUrl,
  roomLimiter,
  publicLimiter,
  errorHandler,
}: RoomRouteDeps): RoomRoutes {
  const router = Router();
  // A failed operation: answered by the app's error middleware, as next(error) would (past this
  // router nothing but that middleware takes an error). The response is `this`.
  function failed(this: Response, error: unknown): void {
    errorHandler(error, this.req, this, noNext);
  }
  // A seat call whose token holds no seat (401) or whose room is unknown (bare 404) is a guess
  // at a code: 401 tells a live room from an unknown one, so these count against the join
  // budget (RATE_LIMIT_ROOMS) like a join, and past it answer 429 (docs/security.md).
  function failedSeatCall(this: Response, error: unknown): void {
    if (!isGuess(error)) return void errorHandler(error, this.req, this, noNext);
    roomLimiter(this.req, this, (limited?: unknown) => errorHandler(limited ?? error, this.req, this, noNext));
  }
  for (const id of OPERATION_IDS) {
    const spec: EndpointSpec = ENDPOINTS[id];
    const run = operations[id] as Operation<OperationId>;
    const before: RequestHandler[] = [];
    if (!spec.room) before.push(publicLimiter);
    // Operations that create rooms (open, join): the room limit applies on top of the general one.
    if (spec.createsRoom) before.push(roomLimiter);
    if (spec.input?.in === "body") before.push(jsonBody);
    const handler: RequestHandler = (req, res) => {
      // The token first: a call without one is 401 whatever else is wrong with it.
      const token = spec.auth === "bearer" ? seatToken(req) : undefined;
      const tokenHash = token === undefined ? "" : hashSeatToken(token);
      const input = spec.input
        ? parseInput(spec.input.schema, spec.input.in === "body" ? req.body : req.query, spec.input.in)
        : undefined;
      // GETs may wait (recv): 'close' on the response before it finished means the client went
      // away, so free the wait. After a finished answer there is nothing to free, and abort()
      // would only build an AbortError (a DOMException with a stack) per call for nobody.
      // ClientGone rather than an AbortController: a waiting recv holds it for its whole wait.
      let signal: ClientGone | undefined;
      if (spec.method === "GET") signal = goneWhenClosed(res);
      const answer = run(input as never, {
        tokenHash,
        token,
        baseUrl: baseUrl(req),
        client: clientKey(req),
        signal,
      });
      // Express's request chain (the routers' and the route's `next`, their closures and
      // contexts) is not kept while the call waits (a recv or status for up to 30 s): the
      // answer's callbacks hold the response only, and the router's `next` is dropped from
      // the request (req.next). Nothing after this route takes the request on but the error
      // middleware, which `failed` calls itself.
      req.next = undefined;
      answer.then(
        spec.createsRoom ? answerNoStore.bind(res) : answerJson.bind(res),
        (spec.auth === "bearer" ? failedSeatCall : failed).bind(res),
      );
    };
    // Express 5 forwards a synchronous throw (401, 400) to the error middleware.
    const route = router.route(spec.path);
    if (spec.method === "GET") route.get(...before, handler);
    else route.post(...before, handler);
  }
  return { router };
}

/** A refusal that tells whether a code names a live room: a token that holds no seat, or an unknown room. */
export const isGuess = (error: unknown): boolean =>
  error instanceof ApiError &&
  (error.code === "unauthorized" || (error.code === "not_found" && error.ended === undefined));

function answerJson(this: Response, body: unknown): void {
  if (body === undefined) return;
  // A body that several answers share (a seat's woken recvs) is rendered once: http/rendered.ts.
  this.type("application/json; charset=utf-8").send(renderedJson(body as object));
}

// Open and join answer a seat token, and open the base URL (from the Host when PUBLIC_URL is
// unset): no cache may keep them.
function answerNoStore(this: Response, body: unknown): void {
  this.setHeader("Cache-Control", "no-store");
  if (body !== undefined) this.json(body);
}

/**
 * Labels a request on a room path (mounted with app.use(ROOM_PATHS, ...), which matches any
 * case and a trailing slash) with the path as the table writes it, so that a refusal before
 * its route (403, 429) keeps the route's label. Anything longer is left to the 404.
 */
export const labelRoomPath: RequestHandler = (req, _res, next) => {
  if (req.path === "/") {
    const path = ROOM_PATHS_BY_LOWER_CASE.get(req.baseUrl.toLowerCase());
    if (path !== undefined) labelRoute(req, path);
  }
  next();
};

/** Paths of the room endpoints (User-Agent policy applies): the table's room calls and the push stream. */
export const ROOM_PATHS: string[] = ROUTES.filter((route) => route.room).map((route) => route.path);

const ROOM_PATHS_BY_LOWER_CASE = new Map(ROOM_PATHS.map((path) => [path.toLowerCase(), path]));
