// The SDK on the push stream, against a scripted fetch: receiveLoop takes messages from
// GET /v1/stream and acks each; reconnects after `end` shutdown; `end` gone is not_found;
// and it falls back to long-poll recv when the stream cannot work (a proxy that buffers
// it and sends nothing, a relay without the endpoint).
import { DuetClient, DuetError } from "../../src";
import { json } from "../support/replies";

const seat = { code: "k7dq-3mxa-9z2f", token: "tok" };
const m = (id: string, text = id) => ({ id, from: "b" as const, text });

/** An SSE stream response as the relay writes it: a first comment, then the events, then (unless held) the end of the body. */
function sse(
  events: Array<{ event: string } & Record<string, unknown>>,
  options: { hold?: boolean; silent?: boolean } = {},
): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      if (options.silent) return; // a buffering proxy: headers, then nothing
      controller.enqueue(encoder.encode(": duet stream\n\n"));
      for (const { event, ...data } of events) {
        const id = event === "message" ? `id: ${data.id}\n` : "";
        controller.enqueue(encoder.encode(`${id}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`));
      }
      if (!options.hold) controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream; charset=utf-8" } });
}

function scripted(script: Array<(url: URL, body: unknown) => Response | Promise<Response>>) {
  const log: string[] = [];
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const body = init?.body ? JSON.parse(String(init.body)) : undefined;
    log.push(url.pathname === "/v1/ack" ? `ack ${(body as { ids: string[] }).ids.join(",")}` : url.pathname.slice(4));
    const step = script.shift();
    if (!step) throw new Error(`unexpected ${url.pathname}`);
    return step(url, body);
  }) as typeof fetch;
  return { fetchImpl, log };
}

describe("receiveLoop on the push stream", () => {
  it("hands each streamed message to the handler and acks it, asking for the event stream of the seat", async () => {
    const urls: string[] = [];
    const { fetchImpl, log } = scripted([
      (url) => {
        urls.push(url.search);
        return sse(
          [
            { event: "message", ...m("1", "one") },
            { event: "message", ...m("2", "two") },
          ],
          { hold: true },
        );
      },
      () => json(200, { ok: true, acked: 1 }),
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const texts: string[] = [];
    const result = await client.receiveLoop(seat, (message) => void texts.push(message.text), { maxMessages: 2 });
    expect(result).toEqual({ handled: 2 });
    expect(texts).toEqual(["one", "two"]);
    expect(log).toEqual(["stream", "ack 1", "ack 2"]);
    expect(urls[0]).toBe("?code=k7dq-3mxa-9z2f");
  });

  it("reconnects after `end` shutdown and does not hand a message twice when the new stream sends it again", async () => {
    const { fetchImpl, log } = scripted([
      () =>
        sse([
          { event: "message", ...m("1") },
          { event: "end", reason: "shutdown" },
        ]),
      () => json(200, { ok: true, acked: 1 }),
      // A stream opened before the ack landed may send the acked message once more.
      () =>
        sse(
          [
            { event: "message", ...m("1") },
            { event: "message", ...m("2") },
          ],
          { hold: true },
        ),
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const handled: string[] = [];
    await client.receiveLoop(seat, (message) => void handled.push(message.id), { maxMessages: 2 });
    expect(handled).toEqual(["1", "2"]);
    expect(log).toEqual(["stream", "ack 1", "stream", "ack 2"]);
  });

  it("`end` gone means the room ended: rejects with not_found, like recv", async () => {
    const { fetchImpl } = scripted([() => sse([{ event: "end", reason: "gone" }])]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(client.receiveLoop(seat, () => undefined)).rejects.toMatchObject({ code: "not_found" });
  });

  it("falls back to long-poll when the stream sends nothing (a proxy buffering it)", async () => {
    const { fetchImpl, log } = scripted([
      () => sse([], { silent: true }),
      () => json(200, { messages: [m("7", "by recv")] }),
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const texts: string[] = [];
    // The first byte is awaited for 5 s by default; the test shortens nothing else.
    const result = await client.receiveLoop(seat, (message) => void texts.push(message.text), { maxMessages: 1 });
    expect(result).toEqual({ handled: 1 });
    expect(texts).toEqual(["by recv"]);
    expect(log).toEqual(["stream", "recv", "ack 7"]);
  }, 120_000);

  it("falls back to long-poll on a relay without the stream endpoint (404, 405)", async () => {
    for (const status of [404, 405]) {
      const { fetchImpl, log } = scripted([
        () => new Response("<html>not here</html>", { status, headers: { "content-type": "text/html" } }),
        () => json(200, { messages: [m("3")] }),
        () => json(200, { ok: true, acked: 1 }),
      ]);
      const client = new DuetClient({ fetch: fetchImpl });
      await expect(client.receiveLoop(seat, () => undefined, { maxMessages: 1 })).resolves.toEqual({ handled: 1 });
      expect(log).toEqual(["stream", "recv", "ack 3"]);
    }
  });

  it("transport: stream does not fall back: the refusal is the loop's error", async () => {
    const { fetchImpl } = scripted([
      () => json(401, { error: "unauthorized", message: "A valid seat token is required." }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const failure = client.receiveLoop(seat, () => undefined, { transport: "stream" });
    await expect(failure).rejects.toBeInstanceOf(DuetError);
    await expect(failure).rejects.toMatchObject({ code: "unauthorized", status: 401 });
  });

  it("client.stream reads the event-stream format: events split across chunks, CRLF, heartbeats, unknown events", async () => {
    const parts = [
      ": duet stream\r\n\r\n",
      'id: 1\r\nevent: message\r\ndata: {"id":"1","from":"b",',
      '"text":"split"}\r\n',
      "\r\n: hb\r\n\r\nevent: something-newer\r\ndata: {}\r\n\r\n",
      'event: end\ndata: {"reason":"closed","ended":{"reason":"closed","by":"b","at":"2026-01-01T00:00:00.000Z"}}\n\n',
    ];
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const part of parts) controller.enqueue(encoder.encode(part));
        controller.close();
      },
    });
    const { fetchImpl } = scripted([
      () => new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } }),
    ]);
    const events = [];
    for await (const event of new DuetClient({ fetch: fetchImpl }).stream(seat)) events.push(event);
    expect(events).toEqual([
      { event: "open" },
      { event: "message", message: m("1", "split") },
      { event: "end", reason: "closed", ended: { reason: "closed", by: "b", at: "2026-01-01T00:00:00.000Z" } },
    ]);
  });

  it("client.stream: data that is not JSON is invalid_response; a body that ends without `end` is a network error", async () => {
    const client = (text: string) =>
      new DuetClient({
        fetch: scripted([() => new Response(text, { status: 200, headers: { "content-type": "text/event-stream" } })])
          .fetchImpl,
      });
    const drain = async (c: DuetClient) => {
      for await (const _ of c.stream(seat));
    };
    await expect(drain(client("event: message\ndata: not json\n\n"))).rejects.toMatchObject({
      code: "invalid_response",
    });
    await expect(drain(client(": duet stream\n\n"))).rejects.toMatchObject({ code: "network" });
  });

  it("client.stream yields open, the messages and the end", async () => {
    const { fetchImpl } = scripted([
      () =>
        sse([
          { event: "message", ...m("1", "hi") },
          { event: "end", reason: "replaced" },
        ]),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const events = [];
    for await (const event of client.stream(seat)) events.push(event);
    expect(events).toEqual([
      { event: "open" },
      { event: "message", message: m("1", "hi") },
      { event: "end", reason: "replaced" },
    ]);
  });
});
