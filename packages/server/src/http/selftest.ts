// GET /v1/selftest and the MCP `selftest` probe: what a client learns about the proxies between
// it and the relay, with no token and no room. mode=longpoll holds the answer for `wait` ms;
// mode=stream sends five ticks a second apart; the MCP probe notes in the store how a held
// call ended, so the same probe name asked again reads it. A held self-test is a waiter under
// realtime/admission.ts. docs/protocol.md §11.8; docs/mcp.md, "Behind a proxy".
import { createHash } from "node:crypto";
import type { RequestHandler, Response } from "express";
import {
  MAX_WAIT_MS,
  SELFTEST_TICKS,
  SELFTEST_TICK_MS,
  SelftestQuery,
  type EndpointParsedInput,
  type SelftestEventData,
  type SelftestEventName,
  type SelftestResponse,
  type SelftestToolInput,
  type SelftestToolResponse,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { WaiterAdmission } from "../realtime/admission.js";
import type { RoomStore } from "../store/room-store.js";
import type { OperationContext } from "./operations.js";
import { clientKey } from "./rate-limit.js";
import { parseInput } from "./validate.js";

const noop = (): void => undefined;

/** The self-tests this node holds now, each with its place under the waiter cap. */
export class HeldSelftests {
  /** Held now (the gauge duet_selftests_waiting). */
  size = 0;

  constructor(private readonly admission?: WaiterAdmission) {}

  /** A place for one held self-test of `client` (call the result when it ends), or the refusal thrown. */
  take(client: string | undefined): () => void {
    const place = this.admission ? this.admission.reserve(client) : noop;
    if (typeof place === "string") throw this.admission!.refusal(place);
    this.size++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.size--;
      place();
    };
  }
}

/** mode=longpoll: answers after `wait` ms (undefined when the client went away first). */
export async function selftestLongPoll(
  { mode, wait }: EndpointParsedInput<"selftest">,
  { signal, client }: OperationContext,
  selftests: HeldSelftests,
): Promise<SelftestResponse | undefined> {
  // The stream mode is served by selftestStream below, before the table's route.
  if (mode === "stream") throw apiError("bad_request", "mode=stream answers an event stream: ask GET /v1/selftest.");
  const waitMs = wait ?? MAX_WAIT_MS;
  const started = performance.now();
  const done = waitMs > 0 ? selftests.take(client) : noop;
  try {
    if (!(await held(waitMs, signal))) return undefined;
  } finally {
    done();
  }
  return { ok: true, mode: "longpoll", waited_ms: Math.round(performance.now() - started) };
}

/** How long a probe's note is kept: past a client's 60 s timeout and a few model turns. */
const PROBE_NOTE_MS = 15 * 60_000;
/**
 * Notes one address may have: a probe's note lives in one of these slots (by its name's
 * hash), and a probe whose slot holds another name's note replaces it. Real clients use a
 * name or two; without the bound one address could leave a note per call for 15 minutes.
 */
export const PROBE_SLOTS = 64;
/** Advised wait as a share of when the path cut a probe, as `duet doctor` advises (room for a slower day). */
const CUT_SHARE = 0.6;

interface ProbeNote {
  /** Which probe name the note is for (a hash: its slot is shared). */
  name?: string;
  outcome: SelftestToolResponse["outcome"];
  wait_ms: number;
  /** The relay's clock when the probe started. */
  started_at: number;
  /** delivered or cut: when, from the start. */
  after_ms?: number;
}

/**
 * The MCP tool: the first call with a probe name holds its answer for `wait` ms (at most
 * `mcpMaxWaitMs`, what this relay holds a waiting recv or status on MCP: MCP_MAX_WAIT_MS)
 * with nothing on the wire and notes how it ended; a later call with the same name answers
 * that note at once. Notes are keyed by the caller's address (as the rate limits see it) and
 * one of PROBE_SLOTS slots, so an address has at most that many.
 */
export async function selftestProbe(
  { probe, wait }: SelftestToolInput,
  { signal, client }: OperationContext,
  store: Pick<RoomStore, "putNote" | "readNote">,
  mcpMaxWaitMs: number,
  selftests: HeldSelftests,
): Promise<SelftestToolResponse | undefined> {
  const name = createHash("sha256").update(`selftest\0${probe}`).digest();
  const key = createHash("sha256")
    .update(`selftest\0${client ?? ""}\0${name[0]! % PROBE_SLOTS}`)
    .digest("base64url");
  const nameHash = name.toString("base64url");
  // Best effort: the probe is a diagnosis, and a store that does not answer must not stop it.
  const put = (note: ProbeNote) => store.putNote(key, JSON.stringify(note), PROBE_NOTE_MS).catch(() => undefined);
  const earlier = await store.readNote(key).catch(() => undefined);
  const found = earlier === undefined ? undefined : (JSON.parse(earlier) as ProbeNote);
  // Another name's note in the slot: this probe is new, and its note replaces that one.
  if (found !== undefined && found.name === nameHash) return report(probe, found, mcpMaxWaitMs);
  const waitMs = Math.min(wait ?? MAX_WAIT_MS, mcpMaxWaitMs);
  // A waiter like a waiting recv: refused (nothing noted) past the node's cap or the client's bound.
  const done = waitMs > 0 ? selftests.take(client) : noop;
  try {
    const startedAt = Date.now();
    const started = performance.now();
    await put({ name: nameHash, outcome: "running", wait_ms: waitMs, started_at: startedAt });
    const delivered = await held(waitMs, signal);
    const note: ProbeNote = {
      name: nameHash,
      outcome: delivered ? "delivered" : "cut",
      wait_ms: waitMs,
      started_at: startedAt,
      after_ms: Math.round(performance.now() - started),
    };
    await put(note);
    return delivered ? report(probe, note, mcpMaxWaitMs) : undefined;
  } finally {
    done();
  }
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
export function selftestStream(limiter: RequestHandler, selftests: HeldSelftests): RequestHandler {
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
      // Its five seconds of ticks hold a place, as a stream does; refused before any byte.
      let done: () => void;
      try {
        done = selftests.take(clientKey(req));
      } catch (refusal) {
        return next(refusal);
      }
      res.once("close", done);
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
  const event = <E extends SelftestEventName>(name: E, data: SelftestEventData<E>) =>
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
