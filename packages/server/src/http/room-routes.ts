// The REST routes, generated from the endpoint table (@duet/protocol's ENDPOINTS): each
// operation's method, path, body or query validation and auth come from its entry; what it
// does is in operations.ts, shared with the MCP tools.
import { Router, type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { ENDPOINTS, OPERATION_IDS, type EndpointSpec, type OperationId } from "@duet/protocol";
import { seatTokenHash } from "./auth.js";
import { labelRoute } from "./request-log.js";
import { jsonBody } from "./body.js";
import type { Operation, Operations } from "./operations.js";
import { ClientGone } from "../realtime/wait-for-messages.js";
import { clientKey } from "./rate-limit.js";
import { parseInput } from "./validate.js";

export interface RoomRouteDeps {
  operations: Operations;
  baseUrl: (req: Request) => string;
  /** Applied to open and join on top of the general limit. */
  roomLimiter: RequestHandler;
  /** The general per-IP limit; room paths get it in app.ts, the others here. */
  publicLimiter: RequestHandler;
}

/** Operations that create rooms: the room limit applies on top of the general one. */
const CREATES_ROOMS: ReadonlySet<OperationId> = new Set(["open", "join"]);

/** An Express route (router's Route): its handlers, run in order with its own next(). */
export interface DispatchableRoute {
  dispatch(req: Request, res: Response, done: NextFunction): void;
}

export interface RoomRoutes {
  /** Every operation's route, mounted the usual way: serves every call the dispatch below does not. */
  router: Router;
  /** The same routes by "METHOD /path", exactly as the endpoint table writes them. */
  routes: ReadonlyMap<string, DispatchableRoute>;
}

export function roomRoutes({ operations, baseUrl, roomLimiter, publicLimiter }: RoomRouteDeps): RoomRoutes {
  const router = Router();
  const routes = new Map<string, DispatchableRoute>();
  for (const id of OPERATION_IDS) {
    const spec: EndpointSpec = ENDPOINTS[id];
    const run = operations[id] as Operation<OperationId>;
    const before: RequestHandler[] = [];
    if (!spec.room) before.push(publicLimiter);
    if (CREATES_ROOMS.has(id)) before.push(roomLimiter);
    if (spec.input?.in === "body") before.push(jsonBody);
    const handler: RequestHandler = (req, res, next) => {
      // The token first: a call without one is 401 whatever else is wrong with it.
      const tokenHash = spec.auth === "bearer" ? seatTokenHash(req) : "";
      const input = spec.input
        ? parseInput(spec.input.schema, spec.input.in === "body" ? req.body : req.query, spec.input.in)
        : undefined;
      // GETs may wait (recv): 'close' on the response before it finished means the client went
      // away, so free the wait. After a finished answer there is nothing to free, and abort()
      // would only build an AbortError (a DOMException with a stack) per call for nobody.
      // ClientGone rather than an AbortController: a waiting recv holds it for its whole wait.
      let signal: ClientGone | undefined;
      if (spec.method === "GET") {
        const abandoned = new ClientGone();
        signal = abandoned;
        res.on("close", () => {
          if (!res.writableFinished) abandoned.abort();
        });
      }
      run(input as never, { tokenHash, baseUrl: baseUrl(req), client: clientKey(req), signal }).then((body) => {
        if (body !== undefined) res.json(body);
      }, next);
    };
    // Express 5 forwards a synchronous throw (401, 400) to the error middleware.
    const route = router.route(spec.path);
    if (spec.method === "GET") route.get(...before, handler);
    else route.post(...before, handler);
    routes.set(`${spec.method} ${spec.path}`, route as unknown as DispatchableRoute);
  }
  return { router, routes };
}

/**
 * The room calls' fast path, the app's first middleware: a call whose method and path are
 * exactly an entry of the table runs `before` (the request log, headers, User-Agent policy
 * and limits the app-level layers would have run) and then its route, without walking the
 * app's other layers. Anything else (HEAD, a trailing slash, another case, an unknown path)
 * goes on to the usual layers, which answer it as before, 404 and 405 included. Errors go on
 * to the app's error middleware as from any route.
 */
export function dispatchRoomCalls(
  routes: ReadonlyMap<string, DispatchableRoute>,
  before: readonly RequestHandler[],
): RequestHandler {
  return (req, res, next) => {
    const url = req.url;
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    const route = routes.get(`${req.method} ${path}`);
    if (route === undefined) return next();
    labelRoute(req, path);
    let index = 0;
    const step = (error?: unknown): void => {
      if (error !== undefined && error !== null) {
        next(error);
        return;
      }
      if (index < before.length) {
        before[index++]!(req, res, step);
        return;
      }
      route.dispatch(req, res, next);
    };
    step();
  };
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

/** Paths of the room endpoints (User-Agent policy applies), with their one allowed method. */
export const ROOM_ENDPOINTS: Record<string, "GET" | "POST"> = {
  ...Object.fromEntries(
    OPERATION_IDS.filter((id) => ENDPOINTS[id].room).map((id) => [ENDPOINTS[id].path, ENDPOINTS[id].method]),
  ),
  // The push stream (stream-route.ts): a room call outside the table (it answers no JSON).
  "/v1/stream": "GET",
};

const ROOM_PATHS_BY_LOWER_CASE = new Map(Object.keys(ROOM_ENDPOINTS).map((path) => [path.toLowerCase(), path]));
