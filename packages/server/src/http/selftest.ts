// GET /v1/selftest: what a client learns about the path between it and the relay (proxies,
// load balancers), with no token and no room. mode=longpoll holds the answer for `wait` ms,
// as a waiting recv is held: a proxy that cuts long requests cuts this one too. mode=stream
// answers as GET /v1/stream does (the same headers and first byte) and sends a `tick` every
// second for five seconds: ticks that arrive together mean something buffers the stream.
// `duet doctor` runs both and advises (docs/streams.md, "Behind a proxy").
import type { RequestHandler, Response } from "express";
import {
  MAX_WAIT_MS,
  SELFTEST_TICKS,
  SELFTEST_TICK_MS,
  SelftestQuery,
  type EndpointParsedInput,
  type SelftestResponse,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { OperationContext } from "./operations.js";
import { parseInput } from "./validate.js";

/** mode=longpoll: answers after `wait` ms (undefined when the client went away first). */
export async function selftestLongPoll(
  { mode, wait }: EndpointParsedInput<"selftest">,
  { signal }: OperationContext,
): Promise<SelftestResponse | undefined> {
  // The stream mode is served by selftestStream below, before the table's route.
  if (mode === "stream") throw apiError("bad_request", "mode=stream answers an event stream: ask GET /v1/selftest.");
  const waitMs = wait ?? MAX_WAIT_MS;
  const started = performance.now();
  if (!(await held(waitMs, signal))) return undefined;
  return { ok: true, mode: "longpoll", waited_ms: Math.round(performance.now() - started) };
}

/** Resolves true after `ms`, or false as soon as the client goes away. */
function held(ms: number, signal: OperationContext["signal"]): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const gone = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", gone);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", gone);
  });
}

/**
 * mode=stream, mounted before the table's routes: counts in `limiter` (the public per-IP
 * limit) like the longpoll mode, and passes every other request on.
 */
export function selftestStream(limiter: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (req.method !== "GET" || req.path !== "/v1/selftest" || req.query.mode !== "stream") return next();
    let query: EndpointParsedInput<"selftest">;
    try {
      query = parseInput(SelftestQuery, req.query, "query");
    } catch (error) {
      return next(error);
    }
    limiter(req, res, (error?: unknown) => {
      if (error) return next(error);
      ticks(res, query.format ?? "sse");
    });
  };
}

function ticks(res: Response, format: "sse" | "ndjson"): void {
  const sse = format === "sse";
  res.status(200);
  // As GET /v1/stream (stream-route.ts): the self-test must take the same path through proxies.
  res.set({
    "content-type": sse ? "text/event-stream; charset=utf-8" : "application/x-ndjson; charset=utf-8",
    "cache-control": "no-cache, no-store",
    "x-accel-buffering": "no",
    "content-encoding": "identity",
  });
  res.flushHeaders();
  res.write(sse ? ": duet selftest\n\n" : " ");
  const event = (name: string, data: Record<string, unknown>) =>
    sse ? `event: ${name}\ndata: ${JSON.stringify(data)}\n\n` : `${JSON.stringify({ event: name, ...data })}\n`;
  let n = 0;
  const timer = setInterval(() => {
    n += 1;
    res.write(event("tick", { n, sent_at_ms: Date.now() }));
    if (n < SELFTEST_TICKS) return;
    clearInterval(timer);
    res.end(event("end", { ticks: n }));
  }, SELFTEST_TICK_MS);
  res.once("close", () => clearInterval(timer));
}
