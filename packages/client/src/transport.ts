// The transport: one HTTP request to the relay and its answer, as a typed value or a
// DuetError. Every call goes through here (User-Agent, Accept, the bearer token, the
// per-request timeout); nothing here retries (retry.ts does).
import {
  ENDPOINTS,
  ERRORS,
  RoomEnding,
  USER_AGENT,
  normalizeRoomCode,
  type EndpointInput,
  type EndpointResponse,
  type EndpointSpec,
  type OperationId,
} from "@duet/protocol";
import type { z } from "zod";
import { DuetAbortError, DuetError, DuetNetworkError, DuetTimeoutError, isProtocolCode } from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string>;
  token?: string;
  signal?: AbortSignal;
  timeoutMs: number;
}

export class Transport {
  readonly baseUrl: string;

  constructor(
    baseUrl: string,
    private readonly fetchImpl: typeof fetch = globalThis.fetch,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
  }

  /** One operation of the endpoint table: its method, path, input placement and answer schema come from there. */
  call<K extends OperationId>(
    operation: K,
    input: EndpointInput<K>,
    options: { token?: string; signal?: AbortSignal; timeoutMs: number },
  ): Promise<EndpointResponse<K>> {
    const spec: EndpointSpec = ENDPOINTS[operation];
    const placed =
      spec.input?.in === "query" ? { query: input as Record<string, string> } : spec.input ? { body: input } : {};
    return this.request(spec.method, spec.path, spec.response, { ...placed, ...options }) as Promise<
      EndpointResponse<K>
    >;
  }

  async request<S extends z.ZodType>(
    method: "GET" | "POST",
    path: string,
    schema: S,
    options: RequestOptions,
  ): Promise<z.infer<S>> {
    const url = this.url(path, options.query);
    const headers: Record<string, string> = { "User-Agent": USER_AGENT, Accept: "application/json" };
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const failure = (error: unknown): DuetError => {
      if (options.signal?.aborted) return new DuetAbortError(undefined, error);
      if (timeout.aborted)
        return new DuetTimeoutError(`${method} ${path} got no answer within ${options.timeoutMs} ms.`, error);
      // Never quote headers here: the Authorization header holds the token.
      return new DuetNetworkError(`Cannot reach the duet relay at ${this.baseUrl} (${describeCause(error)}).`, error);
    };

    let response: Response;
    let text: string;
    try {
      response = await this.fetchImpl(url, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal,
      });
      text = await response.text();
    } catch (error) {
      throw failure(error);
    }

    const json = parseJson(text);
    if (!response.ok) throw errorFromAnswer(response, json, method, path);
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      throw new DuetError(
        "invalid_response",
        `${method} ${path} answered ${response.status} with a body that is not the duet protocol.`,
        { status: response.status },
      );
    }
    return parsed.data;
  }

  /**
   * Opens a held-open GET (a stream) and returns the response once its headers arrived and
   * are `contentType`; a refusal is the relay's DuetError, as for any call. The caller reads
   * the body and cancels `signal` to close it.
   */
  async openStream(
    path: string,
    query: Record<string, string>,
    options: { token?: string; contentType: string; signal: AbortSignal; userSignal?: AbortSignal },
  ): Promise<Response & { body: ReadableStream<Uint8Array> }> {
    const headers: Record<string, string> = { "User-Agent": USER_AGENT, Accept: options.contentType };
    if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
    let response: Response;
    try {
      response = await this.fetchImpl(this.url(path, query), { headers, signal: options.signal });
    } catch (error) {
      if (options.userSignal?.aborted) throw new DuetAbortError(undefined, error);
      throw new DuetNetworkError(
        `The stream from ${this.baseUrl} could not be opened (${describeCause(error)}).`,
        error,
      );
    }
    if (
      !response.ok ||
      !(response.headers.get("content-type") ?? "").startsWith(options.contentType) ||
      !response.body
    ) {
      const text = await response.text().catch(() => "");
      throw response.ok
        ? new DuetError("invalid_response", `GET ${path} answered something that is not a duet stream.`, {
            status: response.status,
          })
        : errorFromAnswer(response, parseJson(text), "GET", path);
    }
    return response as Response & { body: ReadableStream<Uint8Array> };
  }

  private url(path: string, query?: Record<string, string>): string {
    return this.baseUrl + path + (query ? `?${new URLSearchParams(query)}` : "");
  }
}

function parseJson(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The canonical code when the input is one; otherwise as given, so the relay names the problem. */
export function canonicalCode(code: string): string {
  return normalizeRoomCode(code) ?? code;
}

/** A refusal as the SDK's error: the catalogue code and message when the body is a duet error. */
export function errorFromAnswer(response: Response, json: unknown, method: string, path: string): DuetError {
  const retryAfter = Number(response.headers.get("retry-after"));
  const retryAfterSeconds =
    Number.isFinite(retryAfter) && retryAfter >= 0 && response.headers.has("retry-after") ? retryAfter : undefined;
  const body = json as { error?: unknown; message?: unknown; ended?: unknown } | undefined;
  if (body && typeof body.error === "string" && isProtocolCode(body.error)) {
    const message = typeof body.message === "string" ? body.message : ERRORS[body.error].message;
    const ended = RoomEnding.safeParse(body.ended);
    return new DuetError(body.error, message, {
      status: response.status,
      retryAfterSeconds,
      ended: ended.success ? ended.data : undefined,
    });
  }
  const code = codeForStatus(response.status);
  return new DuetError(
    code,
    `${method} ${path} answered HTTP ${response.status}${code === "invalid_response" ? " (not a duet error body)" : ""}.`,
    { status: response.status, retryAfterSeconds },
  );
}

function codeForStatus(status: number): DuetError["code"] {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 429:
      return "rate_limited";
    case 502:
    case 503:
    case 504:
      return "unavailable";
    default:
      return status >= 500 ? "internal" : "invalid_response";
  }
}

/** What broke a connection, without anything of the request (headers hold the token). */
export function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}
