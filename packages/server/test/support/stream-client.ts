// Reads GET /v1/stream as a client would: Server-Sent Events (or NDJSON) parsed as they
// arrive, so a test can wait for the next event without waiting for the stream's end.
import { USER_AGENT } from "@duet/protocol";
import type { TestClient } from "./http-client";

export interface StreamEvent {
  event: string;
  /** SSE `id:` (message events). */
  id?: string;
  data: any;
}

export interface TestStream {
  status: number;
  headers: Headers;
  /** Every event so far, in order. */
  events: StreamEvent[];
  /** The raw bytes so far (heartbeats included). */
  raw(): string;
  /** Resolves with the nth event (0-based), waiting for it up to timeoutMs. */
  event(index: number, timeoutMs?: number): Promise<StreamEvent>;
  /** Resolves when the server ended the response (or the client closed it). */
  finished: Promise<void>;
  /** True once the response has ended. */
  done(): boolean;
  /** The client goes away. */
  close(): void;
}

export interface StreamOptions {
  node?: number;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  format?: "sse" | "ndjson";
}

export async function openStream(
  client: TestClient,
  code: string,
  token: string,
  options: StreamOptions = {},
): Promise<TestStream> {
  const url = new URL("/v1/stream", client.nodeUrl(options.node ?? 0));
  url.searchParams.set("code", code);
  if (options.format) url.searchParams.set("format", options.format);
  for (const [name, value] of Object.entries(options.query ?? {})) url.searchParams.set(name, value);
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: { "user-agent": USER_AGENT, authorization: `Bearer ${token}`, ...options.headers },
    signal: abort.signal,
  });
  const events: StreamEvent[] = [];
  let raw = "";
  let ended = false;
  const waiting = new Set<() => void>();
  const notify = () => {
    for (const wake of waiting) wake();
  };
  const finished = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        const text = decoder.decode(chunk, { stream: true });
        raw += text;
        buffered += text;
        const separator = options.format === "ndjson" ? "\n" : "\n\n";
        for (let at = buffered.indexOf(separator); at >= 0; at = buffered.indexOf(separator)) {
          const block = buffered.slice(0, at);
          buffered = buffered.slice(at + separator.length);
          const parsed = options.format === "ndjson" ? parseNdjson(block) : parseSse(block);
          if (parsed) events.push(parsed);
        }
        notify();
      }
    } catch {
      // closed by the client
    } finally {
      ended = true;
      notify();
    }
  })();
  return {
    status: response.status,
    headers: response.headers,
    events,
    raw: () => raw,
    finished,
    done: () => ended,
    close: () => abort.abort(),
    event: (index, timeoutMs = 10_000) =>
      new Promise<StreamEvent>((resolve, reject) => {
        const check = () => {
          if (events.length > index) {
            cleanup();
            resolve(events[index]!);
          } else if (ended) {
            cleanup();
            reject(new Error(`the stream ended after ${events.length} events: ${JSON.stringify(events)}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no event #${index} within ${timeoutMs} ms; so far ${JSON.stringify(events)}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiting.delete(check);
        };
        waiting.add(check);
        check();
      }),
  };
}

function parseSse(block: string): StreamEvent | undefined {
  let event = "message";
  let id: string | undefined;
  const data: string[] = [];
  let any = false;
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    any = true;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  if (!any) return undefined;
  return { event, id, data: data.length ? JSON.parse(data.join("\n")) : undefined };
}

function parseNdjson(line: string): StreamEvent | undefined {
  if (line.trim() === "") return undefined;
  const { event, ...rest } = JSON.parse(line) as { event: string; id?: string };
  return { event, id: rest.id, data: rest };
}

/** The node's open streams, from its /metrics. */
export async function openStreamsOn(client: TestClient, node = 0): Promise<number> {
  const { text } = await client.metrics(node);
  return Number(/^duet_streams_open (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}
