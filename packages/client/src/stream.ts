// Reading the relay's Server-Sent Events (GET /v1/stream, and the self-test's stream) with
// eventsource-parser, a small, well-kept parser of the WHATWG event-stream format (line
// endings, multi-line data, comments and fields as browsers read them). What is duet's
// here: the first-byte deadline that tells a buffering proxy from a quiet stream, and the
// mapping of the stream's events to typed values, read with the schemas @duet/protocol
// declares them by (STREAM_EVENTS).
import { STREAM_EVENTS } from "@duet/protocol";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { DuetAbortError, DuetError, DuetNetworkError } from "./errors.js";
import type { SeatCredentials, StreamEvent, StreamOptions } from "./options.js";
import { type Transport, canonicalCode, describeCause } from "./transport.js";

/** The largest event the parser holds: a 2 MiB text JSON-escaped to its worst case (×6), with room. */
const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/** What an event stream yields: `open` at its first byte, then each event as it completes. */
export type SseItem = { kind: "open" } | ({ kind: "event" } & EventSourceMessage);

export interface EventStreamOptions {
  token?: string;
  /** Closes the stream; iteration then ends with DuetAbortError. */
  signal?: AbortSignal;
  /** Without a first byte (headers included) within this long the stream counts as broken: a proxy may be buffering it. */
  firstByteTimeoutMs: number;
}

/**
 * Opens `path` as an event stream and yields its events until the body ends (the caller
 * decides whether that was expected). Rejects with the relay's DuetError when it refuses,
 * DuetNetworkError when the connection fails or no first byte comes in time, DuetAbortError
 * when `signal` fires.
 */
export async function* eventStream(
  transport: Transport,
  path: string,
  query: Record<string, string>,
  options: EventStreamOptions,
): AsyncGenerator<SseItem> {
  const closing = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, closing.signal]) : closing.signal;
  const failure = (error: unknown, what: string): DuetError => {
    if (options.signal?.aborted) return new DuetAbortError(undefined, error);
    if (error instanceof DuetError) return error;
    return new DuetNetworkError(`The stream from ${transport.baseUrl} ${what} (${describeCause(error)}).`, error);
  };
  let timer: NodeJS.Timeout | undefined;
  const firstByte = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      closing.abort();
      reject(
        new DuetNetworkError(
          `The stream from ${transport.baseUrl} sent nothing within ${options.firstByteTimeoutMs} ms: a proxy may be buffering it.`,
        ),
      );
    }, options.firstByteTimeoutMs);
  });
  firstByte.catch(() => undefined);

  const parsed: SseItem[] = [];
  let parseError: DuetError | undefined;
  const parser = createParser({
    maxBufferSize: MAX_EVENT_CHARS,
    onEvent: (event) => void parsed.push({ kind: "event", ...event }),
    onError: (error) => {
      // An unknown field is ignored, as the format says; an event past the limit is not a duet stream.
      if (error.type === "max-buffer-size-exceeded")
        parseError = new DuetError("invalid_response", `GET ${path} sent an event larger than any duet event.`);
    },
  });
  try {
    let response: Response & { body: ReadableStream<Uint8Array> };
    try {
      response = await Promise.race([
        transport.openStream(path, query, {
          token: options.token,
          contentType: "text/event-stream",
          signal,
          userSignal: options.signal,
        }),
        firstByte,
      ]);
    } catch (error) {
      throw failure(error, "could not be opened");
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let first = true;
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = first ? await Promise.race([reader.read(), firstByte]) : await reader.read();
      } catch (error) {
        throw failure(error, "broke");
      }
      if (first) {
        clearTimeout(timer);
        first = false;
        yield { kind: "open" };
      }
      if (chunk.done) return;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      if (parseError) throw parseError;
      while (parsed.length > 0) yield parsed.shift()!;
    }
  } finally {
    clearTimeout(timer);
    closing.abort();
  }
}

/** An event's data as JSON, or invalid_response naming the stream. */
export function eventData(path: string, event: EventSourceMessage): Record<string, unknown> {
  let data: unknown;
  try {
    data = JSON.parse(event.data);
  } catch {
    throw new DuetError("invalid_response", `GET ${path} sent an event whose data is not JSON.`);
  }
  if (typeof data !== "object" || data === null)
    throw new DuetError("invalid_response", `GET ${path} sent an event whose data is not a JSON object.`);
  return data as Record<string, unknown>;
}

/**
 * The push stream of a seat (GET /v1/stream, Server-Sent Events): `open`, then its pending
 * messages oldest first and each new one as it arrives, until the `end` event. Events this
 * SDK does not know are skipped. A body that ends without `end` is a broken connection.
 */
export async function* seatStream(
  transport: Transport,
  seat: SeatCredentials,
  options: StreamOptions = {},
): AsyncGenerator<StreamEvent> {
  const query: Record<string, string> = { code: canonicalCode(seat.code) };
  if (options.after !== undefined) query.after = options.after;
  const path = "/v1/stream";
  for await (const item of eventStream(transport, path, query, {
    token: seat.token,
    signal: options.signal,
    firstByteTimeoutMs: options.firstByteTimeoutMs ?? 5000,
  })) {
    if (item.kind === "open") {
      yield { event: "open" };
      continue;
    }
    if (item.event === "message") {
      const message = STREAM_EVENTS.message.safeParse(eventData(path, item));
      if (message.success) yield { event: "message", message: message.data };
    } else if (item.event === "read") {
      const read = STREAM_EVENTS.read.safeParse(eventData(path, item));
      if (read.success) yield { event: "read", ...read.data };
    } else if (item.event === "end") {
      // Read leniently: a reason this SDK does not know yet (a later relay's), or none, still ends the stream.
      const data = eventData(path, item);
      const ended = STREAM_EVENTS.end.shape.ended.safeParse(data.ended);
      yield {
        event: "end",
        reason: typeof data.reason === "string" ? data.reason : "unknown",
        ...(ended.success && ended.data ? { ended: ended.data } : {}),
      };
      return;
    }
  }
  throw new DuetNetworkError(`The stream from ${transport.baseUrl} ended without an end event.`);
}
