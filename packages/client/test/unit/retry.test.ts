// The SDK's retry rules, timed against a scripted fetch: what is retried, with which key,
// after how long, when it gives up, and how cancellation cuts a wait short.
import { DuetAbortError, DuetClient, DuetError, DuetNetworkError } from "../../src";
import { json, statusBody } from "../support/replies";

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: Record<string, unknown> | undefined;
  signal?: AbortSignal | null;
  at: number;
}

const refusal = (status: number, error: string, headers: Record<string, string> = {}) =>
  json(status, { error, message: `refused: ${error}` }, headers);
/** Seat a's status with `pendingIn` and `pendingOut` messages pending (ids 1, 2, …). */
const pendingStatus = (pendingIn: number, pendingOut: number) =>
  statusBody(
    Array.from({ length: pendingOut }, (_, i) => String(i + 1)),
    pendingIn,
  );

/** A fetch that answers from a script, one function per expected call, and records the calls. */
function scriptedFetch(script: Array<(call: Call) => Response | Promise<Response>>) {
  const calls: Call[] = [];
  const started = Date.now();
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit) => {
    const call: Call = {
      url: String(input),
      method: init?.method ?? "GET",
      headers: Object.fromEntries(
        Object.entries((init?.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]),
      ),
      body: init?.body ? JSON.parse(String(init.body)) : undefined,
      signal: init?.signal,
      at: Date.now() - started,
    };
    calls.push(call);
    const step = script.shift();
    if (!step) throw new Error(`unexpected call ${call.method} ${call.url}`);
    return step(call);
  }) as typeof fetch;
  return { fetchImpl, calls };
}

const seat = { code: "k7dq-3mxa-9z2f", token: "tok-secret-abc" };

describe("send retries", () => {
  it("waits Retry-After on 429 rate_limited and retries with the same idempotency key", async () => {
    const { fetchImpl, calls } = scriptedFetch([
      () => refusal(429, "rate_limited", { "retry-after": "1" }),
      () => json(200, { id: "1" }),
    ]);
    const client = new DuetClient({ baseUrl: "http://relay.test/", fetch: fetchImpl });
    await expect(client.send(seat, "hello")).resolves.toEqual({ id: "1" });
    expect(calls).toHaveLength(2);
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(950);
    expect(calls[0]!.body).toEqual({ code: seat.code, text: "hello", idempotency_key: expect.any(String) });
    expect(calls[1]!.body).toEqual(calls[0]!.body);
    expect(calls[0]!.url).toBe("http://relay.test/v1/send");
    expect(calls[0]!.headers["user-agent"]).toBe("duet/0.1");
    expect(calls[0]!.headers.authorization).toBe("Bearer tok-secret-abc");
  });

  it("uses a fresh key for each logical send, and the caller's key when given", async () => {
    const { fetchImpl, calls } = scriptedFetch([
      () => json(200, { id: "1" }),
      () => json(200, { id: "2" }),
      () => json(200, { id: "3" }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await client.send(seat, "one");
    await client.send(seat, "two");
    await client.send(seat, "three", { idempotencyKey: "my-key-1" });
    const keys = calls.map((c) => c.body!.idempotency_key);
    expect(new Set(keys).size).toBe(3);
    expect(keys[2]).toBe("my-key-1");
  });

  it("retries network errors with backoff and the same key", async () => {
    const { fetchImpl, calls } = scriptedFetch([
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNRESET" } })),
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } })),
      () => json(200, { id: "9" }),
    ]);
    const waits: string[] = [];
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.send(seat, "hi", { onWait: (e) => waits.push(e.reason) })).resolves.toEqual({ id: "9" });
    expect(new Set(calls.map((c) => c.body!.idempotency_key)).size).toBe(1);
    expect(waits).toEqual(["network", "network"]);
  });

  it("on 429 mailbox_full polls status and sends again only once the peer has acked", async () => {
    const { fetchImpl, calls } = scriptedFetch([
      () => refusal(429, "mailbox_full", { "retry-after": "1" }),
      () => json(200, pendingStatus(0, 8)),
      () => json(200, pendingStatus(0, 8)),
      () => json(200, pendingStatus(0, 5)),
      () => json(200, { id: "8" }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.send(seat, "ninth")).resolves.toEqual({ id: "8" });
    expect(calls.map((c) => new URL(c.url).pathname)).toEqual([
      "/v1/send",
      "/v1/status",
      "/v1/status",
      "/v1/status",
      "/v1/send",
    ]);
    expect(calls[4]!.body).toEqual(calls[0]!.body);
  });

  it("on a full mailbox, gives up with mailbox_full even when the budget runs out while it looks at the mailbox", async () => {
    // The status call that checks for space answers only after the send's whole budget.
    const { fetchImpl } = scriptedFetch([
      () => refusal(429, "mailbox_full", { "retry-after": "1" }),
      (call) =>
        new Promise<Response>((_resolve, reject) =>
          call.signal?.addEventListener("abort", () => reject(call.signal!.reason), { once: true }),
        ),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const error = await client.send(seat, "x", { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "mailbox_full", status: 429 });
  });

  it("gives up with the last refusal when the time budget cannot cover Retry-After", async () => {
    const { fetchImpl, calls } = scriptedFetch([() => refusal(429, "rate_limited", { "retry-after": "30" })]);
    const client = new DuetClient({ fetch: fetchImpl });
    const started = Date.now();
    const error = await client.send(seat, "x", { timeoutMs: 2000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuetError);
    expect(error).toMatchObject({ code: "rate_limited", status: 429, retryAfterSeconds: 30 });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(calls).toHaveLength(1);
  });

  it("does not retry what the relay rejected for good", async () => {
    const { fetchImpl, calls } = scriptedFetch([() => refusal(409, "idempotency_conflict")]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.send(seat, "x")).rejects.toMatchObject({ code: "idempotency_conflict", status: 409 });
    expect(calls).toHaveLength(1);
  });

  it("refuses a text over 2 MiB without uploading it", async () => {
    const { fetchImpl, calls } = scriptedFetch([]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.send(seat, "é".repeat(1_048_577))).rejects.toMatchObject({ code: "too_large" });
    expect(calls).toHaveLength(0);
  });

  it("stops waiting at once when the AbortSignal fires", async () => {
    const { fetchImpl } = scriptedFetch([() => refusal(429, "rate_limited", { "retry-after": "20" })]);
    const client = new DuetClient({ fetch: fetchImpl });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const started = Date.now();
    await expect(client.send(seat, "x", { signal: controller.signal })).rejects.toBeInstanceOf(DuetAbortError);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe("answers and errors", () => {
  it("maps a non-JSON 502 to unavailable and retries it", async () => {
    const { fetchImpl } = scriptedFetch([
      () => new Response("bad gateway", { status: 502 }),
      () => json(200, pendingStatus(1, 0)),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.status(seat)).resolves.toMatchObject({ pending_in: 1 });
  });

  it("carries the relay's code, status and message, and never the token", async () => {
    const { fetchImpl } = scriptedFetch([() => refusal(404, "not_found")]);
    const client = new DuetClient({ fetch: fetchImpl });
    const error = (await client.status(seat).catch((e: unknown) => e)) as DuetError;
    expect(error).toBeInstanceOf(DuetError);
    expect(error).toMatchObject({ code: "not_found", status: 404, message: "refused: not_found" });
    expect(error.remedy).toMatch(/open a new room/);
    expect(JSON.stringify({ ...error, message: error.message, stack: error.stack })).not.toContain(seat.token);
  });

  it("reports an unreachable relay as DuetNetworkError without retrying open", async () => {
    const { fetchImpl, calls } = scriptedFetch([
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } })),
    ]);
    const client = new DuetClient({ baseUrl: "http://relay.test", fetch: fetchImpl });
    const error = await client.open().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuetNetworkError);
    expect((error as Error).message).toContain("ECONNREFUSED");
    expect(calls).toHaveLength(1);
  });

  it("rejects an answer that is not the duet protocol", async () => {
    const { fetchImpl } = scriptedFetch([() => json(200, { hello: "world" })]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.stats()).rejects.toMatchObject({ code: "invalid_response", status: 200 });
  });

  it("treats a retried close that finds the room gone as closed", async () => {
    const { fetchImpl } = scriptedFetch([
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNRESET" } })),
      () => refusal(404, "not_found"),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.close(seat)).resolves.toEqual({ ok: true });
  });
});

describe("waitForPeer", () => {
  it("long-polls status (wait=) until the peer has joined, with no pause between polls", async () => {
    const { fetchImpl, calls } = scriptedFetch([
      () => json(200, { ...pendingStatus(0, 0), members: ["a"], peer_joined: false }),
      () => json(200, { ...pendingStatus(0, 0), members: ["a"], peer_joined: false }),
      () => json(200, pendingStatus(0, 0)),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.waitForPeer(seat, { pollMs: 5000 })).resolves.toMatchObject({ peer_joined: true });
    expect(calls).toHaveLength(3);
    for (const call of calls) expect(new URL(call.url).searchParams.get("wait")).toBe("5000");
  });

  it("times out with DuetTimeoutError, never asking the relay to wait past the deadline", async () => {
    const alone = (call: Call) =>
      new Promise<Response>((resolve) =>
        setTimeout(
          () => resolve(json(200, { ...pendingStatus(0, 0), members: ["a"], peer_joined: false })),
          Number(new URL(call.url).searchParams.get("wait") ?? 0),
        ),
      );
    const { fetchImpl, calls } = scriptedFetch(Array.from({ length: 20 }, () => alone));
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.waitForPeer(seat, { pollMs: 100, timeoutMs: 350 })).rejects.toMatchObject({ code: "timeout" });
    for (const call of calls) expect(Number(new URL(call.url).searchParams.get("wait") ?? 0)).toBeLessThanOrEqual(350);
  });

  it("rejects with how the room ended when it ends first", async () => {
    const ended = { reason: "closed", by: "a", at: "2026-11-26T06:00:00.000Z" };
    const { fetchImpl } = scriptedFetch([
      () => json(404, { error: "not_found", message: "The room ended: you (seat a) closed it.", ended }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.waitForPeer(seat)).rejects.toMatchObject({ code: "not_found", ended });
  });
});
