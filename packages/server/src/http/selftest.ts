// GET /v1/selftest: what a client learns about the path between it and the relay (proxies,
// load balancers), with no token and no room. mode=longpoll holds the answer for `wait` ms,
// as a waiting recv is held: a proxy that cuts long requests cuts this one too. mode=stream
// answers as GET /v1/stream does (the same headers and first byte) and sends a `tick` every
// second for five seconds: ticks that arrive together mean something buffers the stream.
// `duet doctor` runs both and advises (docs/streams.md, "Behind a proxy").
//
// On MCP the self-test is the `selftest` tool, a named probe (selftestProbe below): the call is
// held with nothing on the wire for its wait, and how it ended (delivered, or cut and when)
// is noted in the store, so that calling the tool again with the same name, on any node,
// reads what happened to a call the path cut and the client never saw answered.
import { createHash } from "node:crypto";
import type { RequestHandler, Response } from "express";
import {
  MAX_WAIT_MS,
  SELFTEST_TICKS,
  SELFTEST_TICK_MS,
  SelftestQuery,
  type EndpointParsedInput,
  type SelftestResponse,
  type SelftestToolInput,
  type SelftestToolResponse,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { RoomStore } from "../store/room-store.js";
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

/** How long a probe's note is kept: past a client's 60 s timeout and a few model turns. */
const PROBE_NOTE_MS = 15 * 60_000;
/** Advised wait as a share of when the path cut a probe, as `duet doctor` advises (room for a slower day). */
const CUT_SHARE = 0.6;

interface ProbeNote {
  outcome: SelftestToolResponse["outcome"];
  wait_ms: number;
  /** The relay's clock when the probe started. */
  started_at: number;
  /** delivered or cut: when, from the start. */
  after_ms?: number;
}

/**
 * The MCP tool: the first call with a probe name holds its answer for `wait` ms with nothing
 * on the wire and notes how it ended; a later call with the same name answers that note at
 * once. Notes are keyed by the caller's address (as the rate limits see it) and the name.
 * `mcpMaxWaitMs` is what this relay holds a waiting recv or status at most (MCP_MAX_WAIT_MS).
 */
export async function selftestProbe(
  { probe, wait }: SelftestToolInput,
  { signal, client }: OperationContext,
  store: Pick<RoomStore, "putNote" | "readNote">,
  mcpMaxWaitMs: number,
): Promise<SelftestToolResponse | undefined> {
  const key = createHash("sha256")
    .update(`selftest\0${client ?? ""}\0${probe}`)
    .digest("base64url");
  // Best effort: the probe is a diagnosis, and a store that does not answer must not stop it.
  const put = (note: ProbeNote) => store.putNote(key, JSON.stringify(note), PROBE_NOTE_MS).catch(() => undefined);
  const earlier = await store.readNote(key).catch(() => undefined);
  if (earlier !== undefined) return report(probe, JSON.parse(earlier) as ProbeNote, mcpMaxWaitMs);
  const waitMs = wait ?? MAX_WAIT_MS;
  const startedAt = Date.now();
  const started = performance.now();
  await put({ outcome: "running", wait_ms: waitMs, started_at: startedAt });
  const delivered = await held(waitMs, signal);
  const note: ProbeNote = {
    outcome: delivered ? "delivered" : "cut",
    wait_ms: waitMs,
    started_at: startedAt,
    after_ms: Math.round(performance.now() - started),
  };
  await put(note);
  return delivered ? report(probe, note, mcpMaxWaitMs) : undefined;
}

function report(probe: string, note: ProbeNote, mcpMaxWaitMs: number): SelftestToolResponse {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const afterMs = note.after_ms ?? Math.max(0, Date.now() - note.started_at);
  const base = { probe, outcome: note.outcome, wait_ms: note.wait_ms, after_ms: afterMs };
  if (note.outcome === "running") {
    const left = Math.max(0, note.wait_ms - afterMs);
    return {
      ...base,
      advice: {
        recv_wait_ms: mcpMaxWaitMs,
        text: `This probe is still held (${s(afterMs)} of ${s(note.wait_ms)}): call selftest with the same probe again in ${s(left)} to read how it ended.`,
      },
    };
  }
  if (note.outcome === "delivered") {
    return {
      ...base,
      advice: {
        recv_wait_ms: Math.min(note.wait_ms, mcpMaxWaitMs),
        text:
          `A held answer came through after ${s(afterMs)} with nothing on the wire: waits up to ${s(note.wait_ms)} survive this path. ` +
          `This relay holds a waiting recv or status at most ${s(mcpMaxWaitMs)} on MCP: pass no wait (or wait=${Math.min(note.wait_ms, mcpMaxWaitMs)}).`,
      },
    };
  }
  const advised = Math.min(mcpMaxWaitMs, Math.floor((afterMs * CUT_SHARE) / 1000) * 1000);
  return {
    ...base,
    advice: {
      recv_wait_ms: advised,
      text:
        `The path cut the held answer after ${s(afterMs)} of ${s(note.wait_ms)} (a proxy's read or request timeout). ` +
        `Pass wait=${advised} to recv and status from here: an empty list then means "call again", never a lost message.` +
        (advised === 0 ? " This path holds nothing: poll with wait=0 and pause between calls." : ""),
    },
  };
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
