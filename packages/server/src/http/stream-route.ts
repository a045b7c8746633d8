// GET /v1/stream: the push stream as Server-Sent Events (default) or NDJSON (?format=ndjson).
// Everything before the first byte (token, query, the room) answers JSON errors like every
// other endpoint; after it, the stream's last event says why it ended. See
// src/realtime/streams.ts for what it delivers and what it costs.
import { Router, type Request, type RequestHandler, type Response } from "express";
import {
  StreamQuery,
  type Message,
  type RoomEnding,
  type StreamEndReason,
  type StreamEventData,
  type StreamEventName,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { OpenStreams, PreparedStream, StreamSink } from "../realtime/streams.js";
import { type ClientGone, goneWhenClosed } from "../realtime/client-gone.js";
import { seatTokenHash } from "./auth.js";
import { clientKey } from "./rate-limit.js";
import { parseInput } from "./validate.js";
import { isGuess } from "./room-routes.js";

// The events as @duet/protocol's STREAM_EVENTS declares them; a message goes out whole, as the
// store read it (the fields of the protocol's Message), never copied field by field.
const endData = (reason: StreamEndReason, ended?: RoomEnding): StreamEventData<"end"> =>
  ended ? { reason, ended } : { reason };
const sseEvent = <E extends StreamEventName>(name: E, data: StreamEventData<E>): string =>
  `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
const ndjsonEvent = <E extends StreamEventName>(name: E, data: StreamEventData<E>): string =>
  `${JSON.stringify({ event: name, ...data })}\n`;

// The sinks are classes, so that an open stream holds one small object and no closures.
class SseSink implements StreamSink {
  constructor(private readonly res: Response) {}
  backlog(): number {
    return this.res.writableLength;
  }
  message(m: Message): void {
    this.res.write(`id: ${m.id}\n${sseEvent("message", m)}`);
  }
  // No id: line, so a client's Last-Event-ID stays the last message's.
  read(ids: string[]): void {
    this.res.write(sseEvent("read", { ids }));
  }
  heartbeat(): void {
    this.res.write(": hb\n\n");
  }
  end(reason: StreamEndReason, ended?: RoomEnding): void {
    if (!this.res.writableEnded) this.res.end(sseEvent("end", endData(reason, ended)));
  }
}

class NdjsonSink implements StreamSink {
  constructor(private readonly res: Response) {}
  backlog(): number {
    return this.res.writableLength;
  }
  message(m: Message): void {
    this.res.write(ndjsonEvent("message", m));
  }
  read(ids: string[]): void {
    this.res.write(ndjsonEvent("read", { ids }));
  }
  // A space is JSON whitespace: bytes for the proxies, and no line for a tool that wakes on each one.
  heartbeat(): void {
    this.res.write(" ");
  }
  end(reason: StreamEndReason, ended?: RoomEnding): void {
    if (!this.res.writableEnded) this.res.end(ndjsonEvent("end", endData(reason, ended)));
  }
}

/** Last-Event-ID (what EventSource sends on reconnect) or ?after: the id to resume after. */
function resumeAfter(req: Request, after: string | undefined): number {
  const header = req.get("last-event-id");
  if (header !== undefined && header !== "" && !/^[0-9]{1,15}$/.test(header)) {
    throw apiError("bad_request", "Last-Event-ID must be a message id (digits).");
  }
  return Math.max(Number(header || 0), Number(after ?? 0));
}

/** `guessBudget`: the join budget, which a token holding no seat or an unknown room counts against (room-routes.ts). */
export function streamRoute(streams: OpenStreams, guessBudget?: RequestHandler): Router {
  const router = Router();
  router.get("/v1/stream", async (req, res, next) => {
    // 'close' before the stream ended means the client went away: free the stream.
    const abandoned = goneWhenClosed(res);
    let prepared: PreparedStream;
    let after: number;
    let format: "sse" | "ndjson";
    let opening = false;
    try {
      const tokenHash = seatTokenHash(req);
      const query = parseInput(StreamQuery, req.query, "query");
      after = resumeAfter(req, query.after);
      format = query.format ?? "sse";
      // Proves the seat, finds the room and listens before the first byte: errors stay JSON.
      opening = true;
      prepared = await streams.open({ code: query.code, tokenHash }, clientKey(req));
    } catch (error) {
      if (opening && guessBudget && isGuess(error))
        return guessBudget(req, res, (limited?: unknown) => next(limited ?? error));
      return next(error);
    }
    if (abandoned.aborted) return void prepared.stopWatching();
    res.status(200);
    res.set({
      "content-type": format === "ndjson" ? "application/x-ndjson; charset=utf-8" : "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-store",
      // nginx: pass each event on at once (the Ingress and infra/nginx/nginx.conf also say so).
      "x-accel-buffering": "no",
      // Nothing may compress (and so buffer) the stream.
      "content-encoding": "identity",
    });
    res.flushHeaders();
    // A first byte at once: the client knows the stream is up and not held by a buffering
    // proxy (SSE: a comment; NDJSON: a space, JSON whitespace that makes no line).
    res.write(format === "sse" ? ": duet stream\n\n" : " ");
    const sink = format === "ndjson" ? new NdjsonSink(res) : new SseSink(res);
    // What was held back while the client was not reading (streams.ts) goes out once it has.
    res.on("drain", prepared.waiter.drained);
    // Served apart from this handler, which returns now: Express's request chain (the
    // router's and the route's closures, `next`, the handler's promise) is then garbage
    // instead of being held for the stream's whole life (~1.5 KB of heap per stream).
    // The router keeps its `next` on the request (req.next), and with it the chain's state.
    req.next = undefined;
    void serveStream(streams, prepared, after, sink, abandoned, res);
  });
  return router;
}

async function serveStream(
  streams: OpenStreams,
  prepared: PreparedStream,
  after: number,
  sink: StreamSink,
  abandoned: ClientGone,
  res: Response,
): Promise<void> {
  try {
    await streams.serve(prepared, after, sink, abandoned);
  } catch {
    // Past the first byte there is no error answer: the stream just ends, and the client reconnects.
  } finally {
    if (!res.writableEnded) res.end();
  }
}
