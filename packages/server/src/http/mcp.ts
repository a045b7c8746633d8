// POST /mcp: the Model Context Protocol over Streamable HTTP (official SDK, 1.x), stateless.
// Every POST gets a fresh SDK McpServer and transport (no MCP session lives in a node's memory),
// so any node answers any request behind a round-robin balancer, exactly like the REST API.
// The tools are generated from the endpoint table and call the same operations as the REST
// routes (operations.ts): same semantics, limits and error catalogue.
//
// The tools/list and tools/call handlers are set on the McpServer's underlying server rather
// than through registerTool, on purpose: tool arguments are then validated by the very zod
// schemas and messages of the REST API (bad_request from the catalogue) instead of the
// SDK's own validation errors, and the JSON Schemas are the ones the OpenAPI document shows.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode as RpcErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { Router, type Request, type RequestHandler, type Response } from "express";
import {
  API_VERSION,
  ERRORS,
  MCP_KEEPALIVE_MS,
  MCP_MAX_WAIT_MS,
  type ErrorCode,
  type OperationId,
} from "@duet/protocol";
import { ApiError, apiError } from "../errors.js";
import { isGuess } from "./room-routes.js";
import type { Logger } from "../logger.js";
import type { RelayMetrics } from "../metrics.js";
import { hashSeatToken } from "../store/credentials.js";
import { jsonBody } from "./body.js";
import type { Operation, Operations } from "./operations.js";
import { clientKey } from "./rate-limit.js";
import { renderedText } from "./rendered.js";
import { echoName, parseInput } from "./validate.js";
import { heldWaitMs, MCP_INSTRUCTIONS, MCP_PATH, MCP_TOOLS, TOOLS_BY_NAME, toolError } from "./mcp-tools.js";

export { MCP_INSTRUCTIONS, MCP_PATH, MCP_TOOLS } from "./mcp-tools.js";

export interface McpDeps {
  operations: Operations;
  baseUrl: (req: Request) => string;
  logger: Logger;
  metrics: RelayMetrics;
  /** The bind host (HOST) and the public URL (PUBLIC_URL), for DNS-rebinding protection. */
  bindHost: string;
  publicUrl?: string;
  /** Per-IP limits: every POST counts as a request; open and join also count as rooms. */
  publicLimiter: RequestHandler;
  roomLimiter: RequestHandler;
  /** The longest a waiting tool call (recv, status) holds its answer (MCP_MAX_WAIT_MS). */
  maxWaitMs?: number;
}

/**
 * Host headers a browser could send for this relay. A DNS-rebinding page sends its own host
 * name, which is never in the list; loopback names are safe because a rebound page cannot
 * make its Host one of them.
 */
function allowedHosts(req: Request, bindHost: string, publicUrl?: string): Set<string> {
  const port = req.socket.localPort;
  const hosts = new Set<string>();
  if (publicUrl) hosts.add(new URL(publicUrl).host.toLowerCase());
  const local =
    bindHost === "0.0.0.0" || bindHost === "::" ? [] : [bindHost.includes(":") ? `[${bindHost}]` : bindHost];
  for (const name of [...local, "localhost", "127.0.0.1", "[::1]"]) hosts.add(`${name}:${port}`.toLowerCase());
  return hosts;
}

/**
 * Origins a browser page may call /mcp from: the public URL's, and a page served on one of
 * the loopback hosts above. A page of any other site (a DNS-rebinding page included) sends
 * its own origin and is refused, as the MCP transport requires; clients that are not
 * browsers send no Origin and are not concerned.
 */
function allowedOrigins(hosts: Set<string>, publicUrl?: string): Set<string> {
  const origins = new Set<string>();
  if (publicUrl) origins.add(new URL(publicUrl).origin.toLowerCase());
  for (const host of hosts) for (const scheme of ["http", "https"]) origins.add(`${scheme}://${host}`);
  return origins;
}

/** A JSON-RPC error answered before MCP runs (no id: it answers no request in particular). */
function rpcRefusal(
  res: Response,
  status: number,
  code: number,
  message: string,
  duet: ErrorCode,
  id: string | number | null = null,
  remedy: string = ERRORS[duet].remedy,
): void {
  res.status(status).json({ jsonrpc: "2.0", id, error: { code, message, data: { error: duet, remedy } } });
}

// The catalogue's 403 remedy is about the User-Agent; a refused Host or Origin is not.
const SAME_SITE_REMEDY =
  "Call /mcp at the relay's public address (PUBLIC_URL, which its operator sets) or on a loopback name; a browser page of another site cannot call it.";

/**
 * Makes every Cache-Control the answer is written with `no-store`: a tool's answer can carry a
 * seat token, and the MCP SDK writes its event stream's headers itself (`no-cache,
 * no-transform`, which lets a cache keep the answer and revalidate it).
 */
function keepNoStore(res: Response): void {
  const noStore = (value: unknown) => (String(value).includes("no-transform") ? "no-store, no-transform" : "no-store");
  const writeHead = res.writeHead;
  res.writeHead = function (this: Response, ...args: unknown[]) {
    const headers = args.find((arg, i) => i > 0 && typeof arg === "object" && arg !== null);
    if (Array.isArray(headers)) {
      // [name, value, name, value, ...] or [[name, value], ...]
      for (let i = 0; i < headers.length; i++) {
        const entry = headers[i];
        if (Array.isArray(entry) && String(entry[0]).toLowerCase() === "cache-control") entry[1] = noStore(entry[1]);
        else if (typeof entry === "string" && entry.toLowerCase() === "cache-control" && i % 2 === 0)
          headers[i + 1] = noStore(headers[i + 1]);
      }
    } else if (headers) {
      const record = headers as Record<string, unknown>;
      for (const name of Object.keys(record))
        if (name.toLowerCase() === "cache-control") record[name] = noStore(record[name]);
    }
    return (writeHead as (...a: unknown[]) => Response).apply(this, args);
  } as Response["writeHead"];
}

type RpcMessage = { method?: unknown; params?: { name?: unknown; arguments?: unknown } } | null;

/** Whether a parsed JSON-RPC message calls a tool that creates rooms (the table's createsRoom: open, join). */
function createsRooms(body: unknown): boolean {
  const message = body as RpcMessage;
  if (message?.method !== "tools/call" || typeof message.params?.name !== "string") return false;
  return TOOLS_BY_NAME.get(message.params.name)?.spec.createsRoom === true;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The SDK answers every POST with `Connection: keep-alive`, and Node then keeps a connection
 * the client asked to close (`Connection: close`, or HTTP/1.0 without keep-alive). For such a
 * request the answer says `Connection: close` instead, and Node ends the connection after it.
 */
function honourConnectionClose(res: Response): void {
  if (res.shouldKeepAlive) return;
  const writeHead = res.writeHead;
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    const headers = rest.map((arg) =>
      isPlainObject(arg)
        ? Object.fromEntries(Object.entries(arg).filter(([name]) => name.toLowerCase() !== "connection"))
        : arg,
    );
    res.setHeader("Connection", "close");
    return (writeHead as (...args: unknown[]) => Response).call(res, status, ...headers);
  }) as typeof res.writeHead;
}

export function mcpRoutes(deps: McpDeps): Router {
  const { operations, baseUrl, logger, metrics } = deps;
  const maxWaitMs = deps.maxWaitMs ?? MCP_MAX_WAIT_MS;
  const router = Router();

  async function callTool(
    name: string,
    args: unknown,
    req: Request,
    signal: AbortSignal,
    onWaiting?: (waited: number, total: number) => void,
  ): Promise<CallToolResult> {
    const entry = TOOLS_BY_NAME.get(name);
    if (!entry)
      throw new McpError(
        RpcErrorCode.InvalidParams,
        `Unknown tool: ${echoName(name)}. The tools are ${MCP_TOOLS.map((t) => t.tool.name).join(", ")}.`,
      );
    // Set once a seat call reaches its room: its 401 or bare 404 is then a guess at a code.
    let ran = false;
    try {
      if (!isPlainObject(args)) throw apiError("bad_request", "The arguments must be a JSON object.");
      let tokenHash = "";
      let rest: Record<string, unknown> = args;
      let token: string | undefined;
      if (entry.spec.auth === "bearer") {
        const { token: given, ...others } = args;
        if (typeof given !== "string" || given === "") {
          throw apiError(
            "unauthorized",
            "Missing seat token: pass the token that open or join returned as the token argument.",
          );
        }
        token = given;
        rest = others;
        tokenHash = hashSeatToken(given);
      }
      const input = parseInput(entry.input, rest, "arguments") as Record<string, unknown>;
      // A waiting room call (recv, status) holds at most maxWaitMs on MCP, whatever it asked.
      if (entry.holds) input.wait = heldWaitMs(entry, input.wait, maxWaitMs);
      const run = operations[entry.id] as Operation<OperationId>;
      ran = entry.spec.auth === "bearer";
      const result = await run(input as never, {
        tokenHash,
        token,
        baseUrl: baseUrl(req),
        client: clientKey(req),
        signal,
        onWaiting,
      });
      if (result === undefined) return { isError: true, content: [{ type: "text", text: "Cancelled." }] };
      return {
        content: [{ type: "text", text: renderedText(result) }],
        structuredContent: result as Record<string, unknown>,
      };
    } catch (error) {
      if (error instanceof McpError) throw error;
      let failure = error instanceof ApiError ? error : undefined;
      if (!failure) {
        logger.error({ err: error, tool: entry.id }, "internal error");
        failure = apiError("internal");
      }
      // Counted against the join budget as on REST (room-routes.ts): past it, 429.
      if (ran && isGuess(failure)) {
        const limited = await new Promise<unknown>((resolve) => deps.roomLimiter(req, req.res!, resolve));
        if (limited instanceof ApiError) failure = limited;
      }
      metrics.countFailure(failure);
      return toolError(failure);
    }
  }

  /**
   * A fresh SDK server for one POST: it holds nothing beyond this request. `rawArguments` are
   * the tool call's arguments as they were sent: the SDK's own parse drops a `__proto__`
   * field and refuses a non-object with a raw zod dump, and the tools check the arguments
   * with the REST API's schemas and messages instead.
   */
  function serverFor(req: Request, rawArguments: unknown): McpServer {
    const mcp = new McpServer(
      { name: "duet", title: "duet relay", version: API_VERSION },
      { capabilities: { tools: {} }, instructions: MCP_INSTRUCTIONS },
    );
    const server = mcp.server;
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: MCP_TOOLS.map((entry) => entry.tool) }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const progressToken = request.params._meta?.progressToken;
      const onWaiting =
        progressToken === undefined
          ? undefined
          : (waited: number, total: number) =>
              void extra
                .sendNotification({
                  method: "notifications/progress",
                  params: { progressToken, progress: waited, total, message: "waiting for a message" },
                })
                .catch(() => undefined);
      return callTool(
        request.params.name,
        rawArguments === undefined ? {} : rawArguments,
        req,
        extra.signal,
        onWaiting,
      );
    });
    return mcp;
  }

  const roomLimitForTools: RequestHandler = (req, res, next) =>
    createsRooms(req.body) ? deps.roomLimiter(req, res, next) : next();

  // DNS-rebinding protection: the Host and the Origin (when a browser sends one) must be this
  // relay's, else 403 before anything else runs. Checked here rather than by the SDK, whose
  // refusal repeats the header sent.
  const sameSite: RequestHandler = (req, res, next) => {
    const hosts = allowedHosts(req, deps.bindHost, deps.publicUrl);
    const host = (req.headers.host ?? "").toLowerCase();
    const origin = req.headers.origin?.toLowerCase();
    if (!hosts.has(host)) {
      metrics.countError("forbidden");
      return rpcRefusal(
        res,
        403,
        -32000,
        "Invalid Host header: /mcp answers only under PUBLIC_URL's host or a loopback name (DNS-rebinding protection).",
        "forbidden",
        null,
        SAME_SITE_REMEDY,
      );
    }
    if (origin !== undefined && !allowedOrigins(hosts, deps.publicUrl).has(origin)) {
      metrics.countError("forbidden");
      return rpcRefusal(
        res,
        403,
        -32000,
        "Invalid Origin header: /mcp answers pages of this relay's own origin only (DNS-rebinding protection).",
        "forbidden",
        null,
        SAME_SITE_REMEDY,
      );
    }
    next();
  };

  // One JSON-RPC message per POST: the MCP revision of 2025-06-18 removed batching, and a
  // batch would count once in the per-IP limits however many calls it held (100 joins, that
  // is 100 guesses at a code, for one).
  const noBatches: RequestHandler = (req, res, next) => {
    if (!Array.isArray(req.body)) return next();
    metrics.countError("bad_request");
    rpcRefusal(
      res,
      400,
      RpcErrorCode.InvalidRequest,
      "JSON-RPC batches are not accepted: send one message per POST (MCP 2025-06-18 removed batching).",
      "bad_request",
    );
  };

  router.post(
    MCP_PATH,
    sameSite,
    deps.publicLimiter,
    jsonBody,
    noBatches,
    roomLimitForTools,
    async (req, res, next) => {
      // A tool's answer can hold a seat token and (open) the base URL built from the request's
      // Host: no cache may keep it.
      res.setHeader("Cache-Control", "no-store");
      keepNoStore(res);
      const message = req.body as RpcMessage;
      // A tools/call without a params object naming the tool: the SDK's own check would answer
      // -32603 (internal error) with a raw zod dump of what was sent.
      if (
        message?.method === "tools/call" &&
        !(isPlainObject(message.params) && typeof message.params.name === "string")
      ) {
        metrics.countError("bad_request");
        const id = (message as { id?: unknown }).id;
        return rpcRefusal(
          res,
          400,
          RpcErrorCode.InvalidParams,
          "tools/call needs params: {name: the tool's name, arguments: an object}.",
          "bad_request",
          typeof id === "string" || typeof id === "number" ? id : null,
        );
      }
      let rawArguments: unknown;
      if (message?.method === "tools/call" && isPlainObject(message.params)) {
        rawArguments = message.params.arguments;
        // What the SDK would refuse (or silently drop a field of) is checked by the tool instead.
        if (rawArguments !== undefined) message.params = { ...message.params, arguments: {} };
      }
      const server = serverFor(req, rawArguments);
      // A held answer keeps bytes flowing (an SSE comment every MCP_KEEPALIVE_MS, the SDK's
      // own keep-alive), so a proxy's idle cut never fires on a waiting call. The self-test's
      // probe is the exception: it measures what the path does to a held answer with nothing
      // on the wire, and answers JSON, so that nothing (not even headers) leaves before it
      // ends and a cut reaches the client as the proxy's own error, not a stream that stops.
      const probe =
        message?.method === "tools/call" && isPlainObject(message.params) && message.params.name === "selftest";
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        keepAliveMs: MCP_KEEPALIVE_MS,
        enableJsonResponse: probe,
      });
      honourConnectionClose(res);
      // Progress notifications stream as SSE: ask nginx (and ingress-nginx) not to buffer them.
      res.setHeader("X-Accel-Buffering", "no");
      // The client went away (or cancelled by closing the request): closing the server aborts
      // every handler of this POST, so a waiting recv stops waiting and frees its slot.
      res.once("close", () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
      } catch (error) {
        next(error);
      }
    },
  );

  // Stateless: no server-initiated stream (GET) and no session to end (DELETE).
  router.all(MCP_PATH, (_req, res, next) => {
    res.set("Allow", "POST");
    next(
      apiError(
        "method_not_allowed",
        `Use POST ${MCP_PATH}: this MCP endpoint is stateless (no GET stream, no session to DELETE).`,
      ),
    );
  });
  return router;
}
