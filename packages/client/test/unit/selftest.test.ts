// DuetClient.selftest against a scripted relay and a fake clock: what it concludes from a
// long-poll that survives or is cut, and from ticks that arrive as sent or in one lump.
import { DuetClient } from "../../src";

const clock = { t: 0 };
const now = () => clock.t;

/** The self-test's stream: one chunk per tick, the clock advancing `gapMs` before each (0: one lump). */
function ticks(gapMs: number): Response {
  const encoder = new TextEncoder();
  const events = [1, 2, 3, 4, 5].map((n) => `event: tick\ndata: {"n":${n},"sent_at_ms":${1000 * n}}\n\n`);
  const chunks = [": duet selftest\n\n", ...events, 'event: end\ndata: {"ticks":5}\n\n'];
  const body =
    gapMs === 0
      ? new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(encoder.encode(chunks.join("")));
            controller.close();
          },
        })
      : new ReadableStream<Uint8Array>({
          pull(controller) {
            const chunk = chunks.shift();
            if (chunk === undefined) return controller.close();
            clock.t += gapMs;
            controller.enqueue(encoder.encode(chunk));
          },
        });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

function relay(longPoll: () => Response | Promise<Response>, stream: () => Response) {
  const urls: string[] = [];
  const fetchImpl = (async (input: string | URL | Request) => {
    const url = new URL(String(input));
    urls.push(url.search);
    return url.searchParams.get("mode") === "stream" ? stream() : longPoll();
  }) as typeof fetch;
  return { client: new DuetClient({ fetch: fetchImpl, now }), urls };
}

const held = (waited: number) =>
  new Response(JSON.stringify({ ok: true, mode: "longpoll", waited_ms: waited }), {
    status: 200,
    headers: { "content-type": "application/json" },
  });

beforeEach(() => {
  clock.t = 0;
});

it("a long-poll held for its wait and ticks a second apart: use the stream, the full wait", async () => {
  const { client, urls } = relay(
    () => held(25_000),
    () => ticks(1000),
  );
  const report = await client.selftest();
  expect(urls.sort()).toEqual(["?mode=longpoll&wait=25000", "?mode=stream"]);
  expect(report.longPoll).toMatchObject({ waitMs: 25_000, survived: true });
  expect(report.stream).toMatchObject({ ticks: 5, buffered: false, arrivalSpreadMs: 4000, sentSpreadMs: 4000 });
  expect(report.advice).toEqual({ transport: "stream", waitMs: 25_000 });
});

it("ticks in one lump: something buffers, use long-poll", async () => {
  const { client } = relay(
    () => held(25_000),
    () => ticks(0),
  );
  const report = await client.selftest();
  expect(report.stream).toMatchObject({ ticks: 5, buffered: true, arrivalSpreadMs: 0, sentSpreadMs: 4000 });
  expect(report.advice.transport).toBe("long-poll");
});

it("a long-poll cut by a proxy (its 504 after 10 s): the wait advised is well below the cut", async () => {
  const { client } = relay(
    () => {
      clock.t += 10_000;
      return new Response("<html>504 Gateway Time-out</html>", { status: 504 });
    },
    () => ticks(1000),
  );
  const report = await client.selftest();
  expect(report.longPoll).toMatchObject({ survived: false, failure: { code: "unavailable" } });
  expect(report.longPoll.elapsedMs).toBeGreaterThanOrEqual(10_000);
  expect(report.advice.waitMs).toBeLessThan(10_000);
  expect(report.advice.waitMs).toBeGreaterThan(0);
});

it("a relay without the self-test: its 404 is the answer, not a verdict", async () => {
  const notFound = () =>
    new Response(JSON.stringify({ error: "not_found", message: "No such endpoint." }), {
      status: 404,
      headers: { "content-type": "application/json" },
    });
  const { client } = relay(notFound, notFound);
  await expect(client.selftest()).rejects.toMatchObject({ code: "not_found" });
});
