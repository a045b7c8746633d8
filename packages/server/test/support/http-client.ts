// A small HTTP client for the behaviour suite. With several base URLs it sends each call to
// the next node in turn, so consecutive steps land on different nodes.
import { USER_AGENT, type JoinResponse, type OpenResponse } from "@duet/protocol";
import { openApiViolations } from "./openapi-check";

export interface Reply<T = any> {
  status: number;
  /** The answer; an error answer has error and message instead. */
  body: T & { error?: string; message?: string };
  text: string;
  headers: Headers;
}

export interface CallOptions {
  body?: unknown;
  /** Sent as is, instead of JSON.stringify(body). */
  rawBody?: string | Buffer;
  token?: string;
  query?: Record<string, string | number>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Pin the call to one node (index into the base URLs). */
  node?: number;
}

export class TestClient {
  private turn = 0;

  /** @param metricsUrls each node's metrics listener (RunningRelay.metricsUrl), by the same index. */
  constructor(
    readonly baseUrls: string[],
    readonly metricsUrls: string[] = [],
  ) {}

  /** GET /metrics on a node's metrics listener (never the public port, which answers 404). */
  async metrics(node = 0): Promise<{ status: number; text: string; headers: Headers }> {
    const base = this.metricsUrls[node % this.baseUrls.length];
    if (!base) throw new Error(`node ${node} has no metrics listener`);
    const response = await fetch(`${base}/metrics`);
    return { status: response.status, text: await response.text(), headers: response.headers };
  }

  nodeUrl(index?: number): string {
    return this.baseUrls[(index ?? this.nextTurn()) % this.baseUrls.length]!;
  }

  /** The node the next unpinned call goes to. */
  protected nextTurn(): number {
    return this.turn++;
  }

  async call<T = any>(method: string, path: string, options: CallOptions = {}): Promise<Reply<T>> {
    const url = new URL(path, this.nodeUrl(options.node));
    for (const [name, value] of Object.entries(options.query ?? {})) url.searchParams.set(name, String(value));
    const headers: Record<string, string> = { "user-agent": USER_AGENT, ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | Buffer | undefined;
    if (options.rawBody !== undefined) body = options.rawBody;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await fetch(url, { method, headers, body, signal: options.signal });
    const text = await response.text();
    let parsed: unknown = text;
    if (text !== "" && (response.headers.get("content-type") ?? "").includes("json")) parsed = JSON.parse(text);
    // Every answer must be one the OpenAPI document describes (support/openapi-check.ts).
    const violations = await openApiViolations(
      method,
      url.pathname,
      response.status,
      response.headers.get("content-type"),
      method === "HEAD" ? "" : text,
    );
    if (violations.length > 0)
      throw new Error(
        `${method} ${url.pathname} answered ${response.status}, which the OpenAPI document does not allow: ${violations.join("; ")}\n${text.slice(0, 300)}`,
      );
    return { status: response.status, body: parsed as Reply<T>["body"], text, headers: response.headers };
  }

  // ---- the protocol's calls ----
  open(options: CallOptions = {}) {
    return this.call<OpenResponse>("POST", "/v1/open", { body: {}, ...options });
  }
  join(code: string, options: CallOptions = {}) {
    return this.call<JoinResponse>("POST", "/v1/join", { body: { code }, ...options });
  }
  send(code: string, token: string, text: string, idempotencyKey?: string, options: CallOptions = {}) {
    return this.call("POST", "/v1/send", {
      body: { code, text, ...(idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey }) },
      token,
      ...options,
    });
  }
  /** Sends each text in turn from one seat; the ids, in order. */
  async sendEach(code: string, token: string, texts: string[]): Promise<string[]> {
    const ids: string[] = [];
    for (const text of texts) ids.push((await this.send(code, token, text)).body.id);
    return ids;
  }
  /** wait "default" leaves the parameter out. */
  recv(code: string, token: string, wait: number | "default" = 0, options: CallOptions = {}) {
    return this.call("GET", "/v1/recv", { query: wait === "default" ? { code } : { code, wait }, token, ...options });
  }
  ack(code: string, token: string, ids: string[], options: CallOptions = {}) {
    return this.call("POST", "/v1/ack", { body: { code, ids }, token, ...options });
  }
  status(code: string, token: string, options: CallOptions = {}) {
    return this.call("GET", "/v1/status", { query: { code }, token, ...options });
  }
  close(code: string, token: string, force?: boolean, options: CallOptions = {}) {
    return this.call("POST", "/v1/close", {
      body: force === undefined ? { code } : { code, force },
      token,
      ...options,
    });
  }
  stats(options: CallOptions = {}) {
    return this.call("GET", "/v1/stats", options);
  }

  /** Opens a room and joins it: both seats' tokens. */
  async pairedRoom() {
    const opened = await this.open();
    if (opened.status !== 200) throw new Error(`open failed: ${opened.status} ${opened.text}`);
    const joined = await this.join(opened.body.code);
    if (joined.status !== 200) throw new Error(`join failed: ${joined.status} ${joined.text}`);
    return { code: opened.body.code, a: opened.body.token, b: joined.body.token, opened: opened.body };
  }
}
