// receiveLoop against a scripted fetch: ack after the handler (long-polling: on the next
// recv), never a message twice, a throwing handler leaves its message pending, the signal
// ends the loop.
import { DuetClient } from "../../src";
import { json } from "../support/replies";

const seat = { code: "k7dq-3mxa-9z2f", token: "tok" };
const m = (id: string, text = id) => ({ id, from: "b", text });

function scripted(script: Array<(path: string, body: unknown) => Response | Promise<Response>>) {
  const log: string[] = [];
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const body = init?.body ? JSON.parse(String(init.body)) : undefined;
    const ack = url.searchParams.get("ack");
    log.push(
      url.pathname === "/v1/ack"
        ? `ack ${(body as { ids: string[] }).ids.join(",")}`
        : `${url.pathname.slice(4)}${ack === null ? "" : ` ack=${ack}`}`,
    );
    const step = script.shift();
    if (!step) throw new Error(`unexpected ${url.pathname}`);
    return step(url.pathname, body);
  }) as typeof fetch;
  return { fetchImpl, log };
}

describe("receiveLoop", () => {
  it("long-polling, acks what it handled with its next recv, and the last ones with one ack call when it ends", async () => {
    const events: string[] = [];
    const { fetchImpl, log } = scripted([
      () => json(200, { messages: [m("1"), m("2")] }),
      () => {
        events.push("recv with acks sent");
        return json(200, { messages: [m("3")] });
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
      { maxMessages: 3, transport: "long-poll" },
    );
    expect(result).toEqual({ handled: 3 });
    expect(log).toEqual(["recv", "recv ack=1,2", "ack 3"]);
    expect(events).toEqual(["handled 1", "handled 2", "recv with acks sent", "handled 3"]);
  });

  it("a handler that throws after others were handled: theirs are acked, its own stays pending", async () => {
    const { fetchImpl, log } = scripted([
      () => json(200, { messages: [m("1"), m("2")] }),
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    await expect(
      client.receiveLoop(
        seat,
        (message) => {
          if (message.id === "2") throw new Error("cannot handle 2");
        },
        { transport: "long-poll" },
      ),
    ).rejects.toThrow("cannot handle 2");
    expect(log).toEqual(["recv", "ack 1"]);
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

  it("does not hand a message twice when the recv carrying its ack was lost; the retry carries it again", async () => {
    const handled: string[] = [];
    const { fetchImpl, log } = scripted([
      () => json(200, { messages: [m("1"), m("2")] }),
      // The answer of the recv that acks 1 and 2 is lost: the retry acks them again (idempotent).
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNRESET" } })),
      () => json(200, { messages: [m("3")] }),
      () => json(200, { ok: true, acked: 1 }),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const result = await client.receiveLoop(seat, (message) => void handled.push(message.id), {
      maxMessages: 3,
      transport: "long-poll",
    });
    expect(result).toEqual({ handled: 3 });
    expect(handled).toEqual(["1", "2", "3"]);
    expect(log).toEqual(["recv", "recv ack=1,2", "recv ack=1,2", "ack 3"]);
  });

  it("ends when its last ack is lost past the retry budget: the handled message stays pending for a later reader", async () => {
    const handled: string[] = [];
    const { fetchImpl, log } = scripted([
      () => json(200, { messages: [m("1")] }),
      // The final ack's answer is lost, again and again, until the retry budget (1 ms) is spent:
      // the loop ends with the message handled, unacked, for a later reader.
      () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNRESET" } })),
    ]);
    const client = new DuetClient({ fetch: fetchImpl });
    const result = await client.receiveLoop(seat, (message) => void handled.push(message.id), {
      retryTimeoutMs: 1,
      maxMessages: 1,
      transport: "long-poll",
    });
    expect(result).toEqual({ handled: 1 });
    expect(log).toEqual(["recv", "ack 1"]);
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
