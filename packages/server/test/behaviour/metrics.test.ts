// /metrics: Prometheus text whose counters follow a scripted exchange, and which never
// holds a room code, a token or a text; served on the metrics listener only (METRICS_PORT),
// never on the public port, and rendered at most once per METRICS_CACHE_MS.
import { PARSER_TARGETS, forEachTarget, pairedRoomOn } from "../support/targets";
import { holdRecv } from "../support/workload";

/** Sum of a sample over every node, e.g. sample(texts, 'duet_rooms_opened_total'). */
function sample(texts: string[], series: string): number {
  let total = 0;
  for (const text of texts) {
    for (const line of text.split("\n")) {
      if (line.startsWith(`${series} `)) total += Number(line.slice(series.length + 1));
    }
  }
  return total;
}

forEachTarget((target) => {
  const scrape = async () => {
    const { client } = target();
    const replies = await Promise.all(client.baseUrls.map((_, node) => client.metrics(node)));
    for (const reply of replies) {
      expect(reply.status).toBe(200);
      expect(reply.headers.get("content-type")).toMatch(/^text\/plain/);
    }
    return replies.map((reply) => reply.text);
  };

  it("counts rooms, messages, bytes, refusals and requests, and leaks no code, token or text", async () => {
    const { client } = target();
    const before = await scrape();
    const room = await client.pairedRoom();
    const first = await client.send(room.code, room.a, "secret-text-1", "k");
    await client.send(room.code, room.a, "secret-text-1", "k"); // replay: not a new message
    for (let i = 0; i < 7; i++) await client.send(room.code, room.b, `filler ${i}`);
    const refused = await client.send(room.code, room.a, "one too many");
    expect(refused.status).toBe(429);
    const waiting = client.recv(room.code, room.b, 0);
    await waiting;
    await client.ack(room.code, room.b, [first.body.id]);
    await client.close(room.code, room.a, true);
    const after = await scrape();
    const delta = (series: string) => sample(after, series) - sample(before, series);
    expect(delta("duet_rooms_opened_total")).toBe(1);
    expect(delta("duet_rooms_joined_total")).toBe(1);
    expect(delta("duet_rooms_closed_total")).toBe(1);
    expect(delta("duet_messages_accepted_total")).toBe(8);
    expect(delta("duet_message_bytes_accepted_total")).toBe("secret-text-1".length + 7 * "filler 0".length);
    expect(delta('duet_errors_total{code="mailbox_full"}')).toBe(1);
    expect(delta('duet_http_requests_total{route="/v1/send",method="POST",status="200"}')).toBe(9);
    expect(sample(after, "duet_recv_waiting")).toBe(0);
    for (const text of after) {
      for (const secret of [room.code, room.a, room.b, "secret-text-1", "filler"]) expect(text).not.toContain(secret);
    }
  });

  it("shows waiting recvs while they wait", async () => {
    const { client, room } = await pairedRoomOn(target);
    const abort = new AbortController();
    // Waiting as a client does: a recv the loaded node shed with a 503 is asked again.
    const failed: string[] = [];
    const waiting = holdRecv(client, room.code, room.a, abort.signal, failed);
    let seen = 0;
    // The deadline only guards against a hang.
    for (
      const deadline = Date.now() + 20_000;
      seen === 0 && Date.now() < deadline;
      await new Promise((r) => setTimeout(r, 50))
    ) {
      seen = sample(await scrape(), "duet_recv_waiting");
    }
    expect(failed).toEqual([]);
    expect(seen).toBe(1);
    abort.abort();
    await waiting;
  });
});

/** Spellings of /metrics a router, a proxy or a client might treat as the same path. */
const SPELLINGS = [
  "/metrics",
  "/METRICS",
  "/Metrics",
  "/metrics/",
  "/metrics?x",
  "/metrics?format=prometheus",
  "//metrics",
  "///metrics/",
  "/metrics//",
  "/%6detrics",
  "/%6Detrics",
  "/metrics%2f",
  "/metrics;x",
  "/metrics.txt",
  "/metrics#x",
  "/v1/../metrics",
  "/./metrics",
];

forEachTarget(
  (target) => {
    it("the public port answers every spelling of /metrics 404 not_found, for every method", async () => {
      const { client } = target();
      for (const spelling of SPELLINGS) {
        for (const method of ["GET", "HEAD", "POST"]) {
          // Concatenated, not resolved: new URL("//metrics", base) would be another host.
          const response = await fetch(`${client.nodeUrl(0)}${spelling}`, {
            method,
            headers: { "user-agent": "Prometheus/2.53.0", accept: "text/plain" },
          });
          const text = await response.text();
          expect({ spelling, method, status: response.status }).toEqual({ spelling, method, status: 404 });
          expect(text).not.toContain("duet_");
          if (method !== "HEAD")
            expect({ spelling, body: JSON.parse(text).error }).toEqual({ spelling, body: "not_found" });
        }
      }
    });

    it("the metrics listener serves /metrics as Prometheus text, and nothing else", async () => {
      const { client } = target();
      const scraped = await client.metrics(0);
      expect(scraped.status).toBe(200);
      expect(scraped.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(scraped.text).toContain("# TYPE duet_http_requests_total counter");
      const other = await fetch(`${client.metricsUrls[0]}/v1/stats`);
      expect(other.status).toBe(404);
      expect(await other.text()).not.toContain("duet_");
      const post = await fetch(`${client.metricsUrls[0]}/metrics`, { method: "POST" });
      expect([post.status, post.headers.get("allow")]).toEqual([405, "GET, HEAD"]);
    });
    // Routing, whatever the store: the in-process relay and the built one as a process.
  },
  { kinds: PARSER_TARGETS },
);

describe("the render cache", () => {
  // A cache far longer than the test: every scrape here falls within one period, whatever the
  // machine's speed, so the assertions hold with no clock in them.
  forEachTarget(
    (target) => {
      it("scrapes within one period share one render, traffic between them notwithstanding", async () => {
        const { client } = target();
        const [first, concurrent] = await Promise.all([client.metrics(0), client.metrics(0)]);
        expect(concurrent.text).toBe(first.text);
        // Requests counted by duet_http_requests_total after the render.
        for (let i = 0; i < 3; i++) expect((await client.call("GET", "/v1/stats", { node: 0 })).status).toBe(200);
        const later = await client.metrics(0);
        expect(later.status).toBe(200);
        expect(later.text).toBe(first.text);
      });
    },
    { env: { METRICS_CACHE_MS: "60000" }, kinds: PARSER_TARGETS },
  );
});

describe("METRICS_PORT=off", () => {
  forEachTarget(
    (target) => {
      it("serves no metrics anywhere: no listener, and the public port still answers 404", async () => {
        const { client } = target();
        expect(client.metricsUrls).toEqual([""]);
        expect(target().nodes.map((node) => node.metricsUrl)).toEqual(target().nodes.map(() => undefined));
        const reply = await client.call("GET", "/metrics");
        expect([reply.status, reply.body.error]).toEqual([404, "not_found"]);
        expect((await client.call("GET", "/healthz")).status).toBe(200);
      });
    },
    { env: { METRICS_PORT: "off" }, kinds: PARSER_TARGETS },
  );
});
