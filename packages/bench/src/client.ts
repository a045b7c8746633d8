// The load generator's HTTP client: undici pools over loopback (keep-alive, one request per
// connection at a time), every call with duet's User-Agent. undici rather than node:http:
// it costs the generator about half the CPU per request, and the generator shares a core
// with Redis, so a heavier client would hide the servers' differences.
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";

export interface Seat {
  code: string;
  token: string;
}
export interface Message {
  id: string;
  from: string;
  text: string;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`HTTP ${status} ${detail}`);
  }
}

export class RelayClient {
  readonly pool: Pool;

  constructor(origin: string, connections: number) {
    this.pool = new Pool(origin, {
      connections,
      pipelining: 1,
      keepAliveTimeout: 120_000,
      keepAliveMaxTimeout: 120_000,
      // A long-poll may be held for its whole wait.
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
  }

  async call<T>(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    token?: string,
    signal?: AbortSignal,
  ): Promise<T> {
    const headers: Record<string, string> = { "user-agent": USER_AGENT };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await this.pool.request({
      method,
      path,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    const text = await response.body.text();
    if (response.statusCode !== 200)
      throw new HttpError(response.statusCode, `${method} ${path}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as T;
  }

  /** A paired room: seat a (opener) and seat b (joiner). */
  async room(): Promise<[Seat, Seat]> {
    const a = await this.call<{ code: string; token: string }>("POST", "/v1/open", {});
    const b = await this.call<{ code: string; token: string }>("POST", "/v1/join", { code: a.code });
    return [
      { code: a.code, token: a.token },
      { code: b.code, token: b.token },
    ];
  }

  send(seat: Seat, text: string, signal?: AbortSignal): Promise<{ id: string }> {
    return this.call("POST", "/v1/send", { code: seat.code, text }, seat.token, signal);
  }

  async recv(seat: Seat, waitMs: number, signal?: AbortSignal): Promise<Message[]> {
    const reply = await this.call<{ messages: Message[] }>(
      "GET",
      `/v1/recv?code=${seat.code}&wait=${waitMs}`,
      undefined,
      seat.token,
      signal,
    );
    return reply.messages;
  }

  ack(seat: Seat, ids: string[], signal?: AbortSignal): Promise<{ acked: number }> {
    return this.call("POST", "/v1/ack", { code: seat.code, ids }, seat.token, signal);
  }

  close(): Promise<void> {
    return this.pool.destroy();
  }
}

/** Runs tasks with at most `limit` in flight. */
export async function inBatches<T>(count: number, limit: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, count) }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}
