// The modules behind DuetClient, each on its own: the transport's answer-to-error mapping,
// the retry engine's rules, sleep's cancellation, the event stream's first-byte deadline and
// the size check before sealing.
import { ENDPOINTS, type EndpointSpec, OPERATION_IDS } from "@duet/protocol";
import { DuetAbortError, DuetClient, DuetError, DuetNetworkError, E2eSession, newRoomKey } from "../../src";
import { textToSend } from "../../src/encrypted-room";
import { type RetryPolicy, retrying } from "../../src/retry";
import { eventStream } from "../../src/stream";
import { sleep } from "../../src/timing";
import { Transport } from "../../src/transport";
import { z } from "zod";

const answering = (response: () => Response | Promise<Response>) =>
  new Transport("http://relay.test/", (async () => response()) as typeof fetch);
const request = (transport: Transport) =>
  transport.request("GET", "/v1/x", z.object({ ok: z.literal(true) }), { token: "tok-secret", timeoutMs: 5000 });

describe("transport", () => {
  it("a duet error body is that error, with Retry-After and how the room ended", async () => {
    const ended = { reason: "closed", by: "b", at: "2026-01-01T00:00:00.000Z" };
    const failure = request(
      answering(
        () =>
          new Response(JSON.stringify({ error: "not_found", message: "The room ended.", ended }), {
            status: 404,
            headers: { "retry-after": "3" },
          }),
      ),
    );
    await expect(failure).rejects.toMatchObject({
      code: "not_found",
      status: 404,
      message: "The room ended.",
      retryAfterSeconds: 3,
      ended,
    });
  });

  it("a proxy's page is named by its status; a 200 that is not the protocol is invalid_response", async () => {
    await expect(
      request(answering(() => new Response("<html>bad gateway</html>", { status: 502 }))),
    ).rejects.toMatchObject({
      code: "unavailable",
      status: 502,
    });
    await expect(request(answering(() => new Response("{}", { status: 200 })))).rejects.toMatchObject({
      code: "invalid_response",
    });
    expect(await request(answering(() => new Response('{"ok":true}')))).toEqual({ ok: true });
  });

  it("a connection that fails is DuetNetworkError naming the relay and the cause, never the token", async () => {
    const failing = new Transport("http://relay.test", (async () => {
      throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
    }) as typeof fetch);
    const error = (await request(failing).catch((e: unknown) => e)) as DuetNetworkError;
    expect(error).toBeInstanceOf(DuetNetworkError);
    expect(error.message).toBe("Cannot reach the duet relay at http://relay.test (ECONNREFUSED).");
    expect(error.message).not.toContain("tok-secret");
  });
});

describe("retry engine", () => {
  const policy: RetryPolicy = { requestTimeoutMs: 1000, retryTimeoutMs: 5000, now: Date.now };
  const failingThen = (errors: DuetError[]) => {
    let calls = 0;
    return {
      attempt: async () => {
        const error = errors[calls++];
        if (error) throw error;
        return "done";
      },
      calls: () => calls,
    };
  };
  const network = () => new DuetNetworkError("down");
  const refused = (code: "rate_limited" | "too_many_waiters" | "unavailable" | "bad_request") =>
    new DuetError(code, code, { status: 400, retryAfterSeconds: 0 });

  it("retries rate_limited, too_many_waiters and unavailable for every call, network errors only for calls safe to repeat", async () => {
    for (const kind of ["refusals", "refusals-and-network"] as const) {
      const run = failingThen([refused("rate_limited"), refused("too_many_waiters"), refused("unavailable")]);
      expect(await retrying(policy, "x", kind, {}, run.attempt)).toBe("done");
      expect(run.calls()).toBe(4);
    }
    const safe = failingThen([network()]);
    expect(await retrying(policy, "x", "refusals-and-network", {}, safe.attempt)).toBe("done");
    const unsafe = failingThen([network()]);
    await expect(retrying(policy, "x", "refusals", {}, unsafe.attempt)).rejects.toBeInstanceOf(DuetNetworkError);
    expect(unsafe.calls()).toBe(1);
  });

  it("any other refusal is thrown at once; a cancelled call does not start", async () => {
    const run = failingThen([refused("bad_request")]);
    await expect(retrying(policy, "x", "refusals-and-network", {}, run.attempt)).rejects.toMatchObject({
      code: "bad_request",
    });
    expect(run.calls()).toBe(1);
    const cancelled = failingThen([]);
    await expect(
      retrying(policy, "x", "refusals", { signal: AbortSignal.abort() }, cancelled.attempt),
    ).rejects.toBeInstanceOf(DuetAbortError);
    expect(cancelled.calls()).toBe(0);
  });

  it("gives up with the last refusal when the budget cannot cover the wait it asks for", async () => {
    const run = failingThen([new DuetError("rate_limited", "slow down", { status: 429, retryAfterSeconds: 60 })]);
    await expect(retrying(policy, "x", "refusals", { timeoutMs: 1000 }, run.attempt)).rejects.toMatchObject({
      code: "rate_limited",
      message: "slow down",
    });
  });
});

describe("sleep", () => {
  it("rejects with DuetAbortError when cancelled, at once when already cancelled", async () => {
    await expect(sleep(60_000, AbortSignal.abort())).rejects.toBeInstanceOf(DuetAbortError);
    const controller = new AbortController();
    const sleeping = sleep(60_000, controller.signal);
    controller.abort();
    await expect(sleeping).rejects.toBeInstanceOf(DuetAbortError);
    await expect(sleep(1)).resolves.toBeUndefined();
  });
});

describe("event stream", () => {
  it("without a first byte in time it is a network error that says a proxy may be buffering", async () => {
    const silent = answering(
      () => new Response(new ReadableStream({ start() {} }), { headers: { "content-type": "text/event-stream" } }),
    );
    const events = eventStream(silent, "/v1/stream", {}, { firstByteTimeoutMs: 50 });
    await expect(events.next()).rejects.toThrow(/sent nothing within 50 ms: a proxy may be buffering it/);
  });
});

describe("textToSend", () => {
  it("refuses what cannot fit before sealing, so the sequence number is not spent", () => {
    const session = E2eSession.start("k7dq-3mxa-9z2f", "a", newRoomKey());
    expect(() => textToSend(session, "x".repeat(session.maxTextBytes() + 1))).toThrow(
      expect.objectContaining({ code: "too_large", status: 400 }),
    );
    expect(session.state.sentSeq).toBe(0);
    expect(textToSend(session, "hi")).toMatch(/^duet-e2e:v1:/);
    expect(session.state.sentSeq).toBe(1);
    expect(textToSend(undefined, "plain")).toBe("plain");
  });
});

test("call reaches every operation of the endpoint table: its method, its path, its input where the table puts it, the token", async () => {
  const sent: { method: string; path: string; query: string; body: unknown; auth: string | null }[] = [];
  const client = new DuetClient({
    baseUrl: "http://relay.test",
    fetch: (async (url: string, init: RequestInit) => {
      const { pathname, search } = new URL(url);
      const body = init.body === undefined ? undefined : JSON.parse(init.body as string);
      sent.push({
        method: init.method!,
        path: pathname,
        query: search,
        body,
        auth: new Headers(init.headers).get("authorization"),
      });
      return new Response(JSON.stringify({ error: "bad_request", message: "seen" }), { status: 400 });
    }) as typeof fetch,
  });
  for (const id of OPERATION_IDS) {
    const spec = ENDPOINTS[id] as EndpointSpec;
    const input = spec.input ? { code: "k7dq-3mxa-9z2f" } : undefined;
    await expect(client.call(id, input as never, { token: "tok" })).rejects.toMatchObject({ code: "bad_request" });
    expect(sent.pop()).toEqual({
      method: spec.method,
      path: spec.path,
      query: spec.input?.in === "query" ? "?code=k7dq-3mxa-9z2f" : "",
      body: spec.input?.in === "body" ? input : undefined,
      auth: "Bearer tok",
    });
  }
});
