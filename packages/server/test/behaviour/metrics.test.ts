// /metrics: Prometheus text whose counters follow a scripted exchange, and which never
// holds a room code, a token or a text.
import { forEachTarget } from "../support/targets";
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
    const replies = await Promise.all(client.baseUrls.map((_, node) => client.call("GET", "/metrics", { node })));
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
    const { client } = target();
    const room = await client.pairedRoom();
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
