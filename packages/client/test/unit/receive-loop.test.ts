// receiveLoop against a scripted fetch: ack after the handler, never a message twice, a
// throwing handler leaves its message pending, the signal ends the loop.
import { DuetClient } from "../../src";

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const seat = { code: "k7dq-3mxa-9z2f", token: "tok" };
const m = (id: string, text = id) => ({ id, from: "b", text });

function scripted(script: Array<(path: string, body: unknown) => Response | Promise<Response>>) {
  const log: string[] = [];
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const body = init?.body ? JSON.parse(String(init.body)) : undefined;
    log.push(url.pathname === "/v1/ack" ? `ack ${(body as { ids: string[] }).ids.join(",")}` : url.pathname.slice(4));
    const step = script.shift();
    if (!step) throw new Error(`unexpected ${url.pathname}`);
    return step(url.pathname, body);
  }) as typeof fetch;
  return { fetchImpl, log };
}

describe("receiveLoop", () => {
  it("acks each message only after its handler resolved, in order", async () => {
    const events: string[] = [];
    const { fetchImpl, log } = scripted([
      () => json(200, { messages: [m("1"), m("2")] }),
      () => {
        events.push("ack 1 sent");
        return json(200, { ok: true, acked: 1 });
      },
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const result = await client.receiveLoop(
      seat,
      async (message) => {
        await new Promise((r) => setTimeout(r, 20));
        events.push(`handled ${message.id}`);
      },
      { maxMessages: 2, transport: "long-poll" },
    );
    expect(result).toEqual({ handled: 2 });
    expect(log).toEqual(["recv", "ack 1", "ack 2"]);
    expect(events).toEqual(["handled 1", "ack 1 sent", "handled 2"]);
  });

  it("stops with the handler's error and leaves that message unacked", async () => {
    const { fetchImpl, log } = scripted([() => json(200, { messages: [m("1"), m("2")] })]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(
      client.receiveLoop(
        seat,
        () => {
          throw new Error("cannot handle");
        },
        { transport: "long-poll" },
      ),
    ).rejects.toThrow("cannot handle");
    expect(log).toEqual(["recv"]);
  });

  it("does not hand a message twice when its ack was lost; it acks it again instead", async () => {
    const handled: string[] = [];
    const { fetchImpl, log } = scripted([
      () => json(200, { messages: [m("1"), m("2")] }),
      // The ack's answer is lost, again and again, until the retry budget (1 ms) is spent.
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNRESET" } })),
      () => json(200, { messages: [m("1"), m("2")] }),
      () => json(200, { ok: true, acked: 1 }),
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const result = await client.receiveLoop(seat, (message) => void handled.push(message.id), {
      retryTimeoutMs: 1,
      maxMessages: 2,
      transport: "long-poll",
    });
    expect(result).toEqual({ handled: 2 });
    expect(handled).toEqual(["1", "2"]);
    expect(log).toEqual(["recv", "ack 1", "recv", "ack 1", "ack 2"]);
  });

  it("gives up when recv keeps failing past its retry budget", async () => {
    const down = () => json(503, { error: "unavailable", message: "store down" });
    const { fetchImpl } = scripted(Array.from({ length: 50 }, () => down));
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(
      client.receiveLoop(seat, () => undefined, { retryTimeoutMs: 300, waitMs: 0, transport: "long-poll" }),
    ).rejects.toMatchObject({ code: "unavailable", status: 503 });
  });

  it("resolves when the signal fires during a long poll", async () => {
    const controller = new AbortController();
    const fetchImpl = ((_input: string, init: RequestInit) =>
      new Promise((_resolve, reject) =>
        init.signal!.addEventListener("abort", () => reject(init.signal!.reason)),
      )) as unknown as typeof fetch;
    const client = new DuetClient({ fetch: fetchImpl });
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    await expect(
      client.receiveLoop(seat, () => undefined, { signal: controller.signal, transport: "long-poll" }),
    ).resolves.toEqual({ handled: 0 });
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
