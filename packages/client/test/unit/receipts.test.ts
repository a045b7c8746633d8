// Read receipts in the SDK against a scripted relay (docs/protocol.md §6.6): status's
// `unread`, waitUntilRead's status waits with until_read, how a room's ending counts, and
// the stream's `read` event in client.stream and receiveLoop.
import { DuetClient, DuetTimeoutError } from "../../src";
import { json, statusBody } from "../support/replies";

const seat = { code: "k7dq-3mxa-9z2f", token: "tok" };
const status = (unread: string[]) => statusBody(unread);

function scripted(script: Array<(url: URL) => Response | Promise<Response>>) {
  const urls: URL[] = [];
  const fetchImpl = (async (input: string | URL | Request) => {
    const url = new URL(String(input));
    urls.push(url);
    const step = script.shift();
    if (!step) throw new Error(`unexpected ${url.pathname}${url.search}`);
    return step(url);
  }) as typeof fetch;
  return { fetchImpl, urls };
}

it("status() returns the ids of this seat's unread messages", async () => {
  const { fetchImpl } = scripted([() => json(200, status(["12", "15"]))]);
  expect((await new DuetClient({ fetch: fetchImpl }).status(seat)).unread).toEqual(["12", "15"]);
});

it("waitUntilRead long-polls status with until_read until no id up to it is unread", async () => {
  const { fetchImpl, urls } = scripted([
    () => json(200, status(["5", "7"])), // the wait ran out: 7 still unread
    () => json(200, status(["9"])), // 5 and 7 read, a later one not yet
  ]);
  const read = await new DuetClient({ fetch: fetchImpl }).waitUntilRead(seat, "7");
  expect(read).toEqual({ unread: ["9"] });
  for (const url of urls) {
    expect(url.pathname).toBe("/v1/status");
    expect(Object.fromEntries(url.searchParams)).toEqual({ code: seat.code, wait: "25000", until_read: "7" });
  }
  expect(urls).toHaveLength(2);
});

it("compares ids as numbers: 10 is after 9", async () => {
  const { fetchImpl } = scripted([() => json(200, status(["10"]))]);
  expect(await new DuetClient({ fetch: fetchImpl }).waitUntilRead(seat, "9")).toEqual({ unread: ["10"] });
});

it("a room that ended with every message acked counts as read; one that abandoned ours does not", async () => {
  const ending = (ended: unknown) => () => json(404, { error: "not_found", message: "The room was closed.", ended });
  const closed = { reason: "closed", by: "b", at: "2026-01-01T00:00:00.000Z" };
  const client = (answer: () => Response) => new DuetClient({ fetch: scripted([answer]).fetchImpl });
  expect(await client(ending(closed)).waitUntilRead(seat, "7")).toEqual({ unread: [], ended: closed });
  const forcedNoneOfOurs = { reason: "force_closed", by: "b", abandoned: { in: 1, out: 0 }, at: closed.at };
  expect((await client(ending(forcedNoneOfOurs)).waitUntilRead(seat, "7")).ended).toEqual(forcedNoneOfOurs);
  const forcedOurs = { reason: "force_closed", by: "b", abandoned: { in: 0, out: 1 }, at: closed.at };
  await expect(client(ending(forcedOurs)).waitUntilRead(seat, "7")).rejects.toMatchObject({
    code: "not_found",
    ended: forcedOurs,
  });
});

it("gives up with DuetTimeoutError when the time runs out, naming what is still unread", async () => {
  let now = 0;
  const { fetchImpl, urls } = scripted([
    () => {
      now += 25_000;
      return json(200, status(["7"]));
    },
    () => {
      now += 5_000;
      return json(200, status(["7"]));
    },
  ]);
  const failure = new DuetClient({ fetch: fetchImpl, now: () => now }).waitUntilRead(seat, "7", { timeoutMs: 30_000 });
  await expect(failure).rejects.toBeInstanceOf(DuetTimeoutError);
  await expect(failure).rejects.toThrow("Message 7 was not read within 30000 ms (unread: 7).");
  // The last wait asks only for what is left of the budget.
  expect(urls[1]!.searchParams.get("wait")).toBe("5000");
});

it("refuses what is not a message id", async () => {
  const { fetchImpl, urls } = scripted([]);
  await expect(new DuetClient({ fetch: fetchImpl }).waitUntilRead(seat, "last")).rejects.toMatchObject({
    code: "bad_request",
  });
  expect(urls).toEqual([]);
});

function sse(text: string): Response {
  return new Response(text, { status: 200, headers: { "content-type": "text/event-stream" } });
}

it("client.stream yields read events; receiveLoop tells onRead and hands on only messages", async () => {
  const body =
    ": duet stream\n\n" +
    'event: read\ndata: {"ids":["3","4"]}\n\n' +
    'id: 8\nevent: message\ndata: {"id":"8","from":"b","text":"hi"}\n\n' +
    'event: end\ndata: {"reason":"shutdown"}\n\n';
  const events = [];
  for await (const event of new DuetClient({ fetch: scripted([() => sse(body)]).fetchImpl }).stream(seat))
    events.push(event);
  expect(events).toEqual([
    { event: "open" },
    { event: "read", ids: ["3", "4"] },
    { event: "message", message: { id: "8", from: "b", text: "hi" } },
    { event: "end", reason: "shutdown" },
  ]);

  const { fetchImpl } = scripted([() => sse(body), () => json(200, { ok: true, acked: 1 })]);
  const reads: string[][] = [];
  const handled: string[] = [];
  await new DuetClient({ fetch: fetchImpl }).receiveLoop(seat, (m) => void handled.push(m.id), {
    maxMessages: 1,
    onRead: (ids) => reads.push(ids),
  });
  expect(reads).toEqual([["3", "4"]]);
  expect(handled).toEqual(["8"]);
});
