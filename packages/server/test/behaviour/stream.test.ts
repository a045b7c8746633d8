// The push stream (GET /v1/stream): pending messages oldest first, then new ones as they
// arrive on any node; resume by Last-Event-ID or ?after; redelivery until ack; `end` when
// the room ends, when newer streams replace it, and on shutdown; a client that leaves
// frees its stream. Every target: in-process, one Redis, three nodes, cluster, black box.
import { BEHAVIOUR_TARGETS, forEachTarget, startTarget, pairedRoomOn } from "../support/targets";
import { sleep, until } from "../support/waiting";
import { openStream, openStreamsOn, type TestStream } from "../support/stream-client";

const messagesOf = (stream: TestStream) => stream.events.filter((e) => e.event === "message").map((e) => e.data.text);

forEachTarget((target) => {
  it("sends the pending messages oldest first, then each new one, with the recv's {id, from, text} and the stream headers", async () => {
    const { client, room } = await pairedRoomOn(target);
    const ids = await client.sendEach(room.code, room.a, ["one", "two", "three"]);
    const stream = await openStream(client, room.code, room.b);
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/);
      expect(stream.headers.get("cache-control")).toBe("no-cache, no-store");
      expect(stream.headers.get("x-accel-buffering")).toBe("no");
      await stream.event(2);
      const recv = await client.recv(room.code, room.b, 0);
      expect(stream.events.map((e) => e.data)).toEqual(recv.body.messages);
      expect(stream.events.map((e) => e.id)).toEqual(ids);
      expect(stream.events.every((e) => e.event === "message")).toBe(true);
      const fourth = await client.send(room.code, room.a, "four", undefined, { node: 1 });
      expect((await stream.event(3)).data).toEqual({ id: fourth.body.id, from: "a", text: "four" });
      // Only messages addressed to the caller: its own sends are not in its stream.
      await client.send(room.code, room.b, "from b");
      const fifth = await client.send(room.code, room.a, "five");
      expect((await stream.event(4)).id).toBe(fifth.body.id);
      expect(messagesOf(stream)).toEqual(["one", "two", "three", "four", "five"]);
    } finally {
      stream.close();
    }
  });

  it("?format=ndjson gives the same events, one JSON object per line", async () => {
    const { client, room } = await pairedRoomOn(target);
    const sent = await client.send(room.code, room.a, "line one");
    const stream = await openStream(client, room.code, room.b, { format: "ndjson" });
    try {
      expect(stream.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
      expect((await stream.event(0)).data).toEqual({ id: sent.body.id, from: "a", text: "line one" });
      await client.close(room.code, room.a, true);
      const ended = { reason: "force_closed", by: "a", abandoned: { in: 1, out: 0 }, at: expect.any(String) };
      expect((await stream.event(1)).data).toEqual({ reason: "force_closed", ended });
      await stream.finished;
      expect(
        stream
          .raw()
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line)),
      ).toEqual([
        { event: "message", id: sent.body.id, from: "a", text: "line one" },
        { event: "end", reason: "force_closed", ended },
      ]);
    } finally {
      stream.close();
    }
  });

  it("resumes after Last-Event-ID (or ?after): only later messages", async () => {
    const { client, room } = await pairedRoomOn(target);
    const ids = await client.sendEach(room.code, room.a, ["m1", "m2", "m3"]);
    const byHeader = await openStream(client, room.code, room.b, { headers: { "last-event-id": ids[0]! } });
    const byQuery = await openStream(client, room.code, room.b, { query: { after: ids[1]! }, node: 1 });
    try {
      await byHeader.event(1);
      await byQuery.event(0);
      const m4 = await client.send(room.code, room.a, "m4");
      await byHeader.event(2);
      await byQuery.event(1);
      expect(byHeader.events.map((e) => e.id)).toEqual([ids[1], ids[2], m4.body.id]);
      expect(byQuery.events.map((e) => e.id)).toEqual([ids[2], m4.body.id]);
    } finally {
      byHeader.close();
      byQuery.close();
    }
  });

  it("does not consume: a fresh stream delivers unacked messages again, acked ones never", async () => {
    const { client, room } = await pairedRoomOn(target);
    const m1 = await client.send(room.code, room.a, "keep me");
    const first = await openStream(client, room.code, room.b);
    expect((await first.event(0)).id).toBe(m1.body.id);
    first.close();
    const second = await openStream(client, room.code, room.b, { node: 1 });
    expect((await second.event(0)).id).toBe(m1.body.id);
    second.close();
    expect((await client.ack(room.code, room.b, [m1.body.id])).status).toBe(200);
    const third = await openStream(client, room.code, room.b, { node: 2 });
    try {
      const m2 = await client.send(room.code, room.a, "after the ack");
      // The first event of the fresh stream is the new message: the acked one is gone.
      expect((await third.event(0)).id).toBe(m2.body.id);
    } finally {
      third.close();
    }
  });

  it("a send on another node wakes the stream; many streams, each woken by its own room", async () => {
    const { client } = target();
    const rooms = await Promise.all(Array.from({ length: 6 }, () => client.pairedRoom()));
    const streams = await Promise.all(rooms.map((room) => openStream(client, room.code, room.b, { node: 0 })));
    try {
      await sleep(100);
      const sent = await Promise.all(
        rooms.map((room, i) => client.send(room.code, room.a, `to ${i}`, undefined, { node: 1 + (i % 2) })),
      );
      for (const [i, stream] of streams.entries())
        expect((await stream.event(0)).data).toEqual({ id: sent[i]!.body.id, from: "a", text: `to ${i}` });
      for (const stream of streams) expect(stream.events).toHaveLength(1);
    } finally {
      for (const stream of streams) stream.close();
    }
  });

  it("a message sent while the stream is opening is never missed (stream and send race on different nodes)", async () => {
    const { client } = target();
    const rooms = await Promise.all(Array.from({ length: 20 }, () => client.pairedRoom()));
    // Each send is fired with the stream's request, at staggered instants around its first
    // read and its subscription.
    const results = await Promise.all(
      rooms.map(async (room, i) => {
        const opening = openStream(client, room.code, room.b, { node: i });
        await sleep(i % 5);
        const sent = await client.send(room.code, room.a, `race ${i}`, undefined, { node: i + 1 });
        const stream = await opening;
        try {
          return { sent: sent.body.id, got: (await stream.event(0)).id };
        } finally {
          stream.close();
        }
      }),
    );
    for (const { sent, got } of results) expect(got).toBe(sent);
  });

  it("ends with `end` naming how the room ended (as recv's 404 does), and the response ends", async () => {
    const { client, room } = await pairedRoomOn(target);
    const stream = await openStream(client, room.code, room.b);
    await sleep(100);
    expect((await client.close(room.code, room.a, undefined, { node: 1 })).status).toBe(200);
    const end = await stream.event(0);
    expect(end).toEqual({
      event: "end",
      id: undefined,
      data: { reason: "closed", ended: { reason: "closed", by: "a", at: expect.any(String) } },
    });
    await stream.finished;
    expect(stream.done()).toBe(true);
    // What recv says of the room now, the stream said.
    const recv = await client.recv(room.code, room.b, 0);
    expect(recv.body.ended).toEqual(end.data.ended);
  });

  it("answers JSON errors before the stream starts: no token 401, unknown room 404, bad query or Last-Event-ID 400", async () => {
    const { client, room } = await pairedRoomOn(target);
    expect((await client.call("GET", "/v1/stream", { query: { code: room.code } })).status).toBe(401);
    const wrongToken = await client.call("GET", "/v1/stream", { query: { code: room.code }, token: "x".repeat(43) });
    expect(wrongToken.status).toBe(401);
    await client.close(room.code, room.a, true);
    const gone = await client.call("GET", "/v1/stream", { query: { code: room.code }, token: room.b });
    expect(gone.status).toBe(404);
    expect(gone.body.error).toBe("not_found");
    const live = await client.pairedRoom();
    const badAfter = await client.call("GET", "/v1/stream", {
      query: { code: live.code, after: "abc" },
      token: live.b,
    });
    expect([badAfter.status, badAfter.body.error]).toEqual([400, "bad_request"]);
    const badFormat = await client.call("GET", "/v1/stream", {
      query: { code: live.code, format: "xml" },
      token: live.b,
    });
    expect([badFormat.status, badFormat.body.error]).toEqual([400, "bad_request"]);
    const badHeader = await client.call("GET", "/v1/stream", {
      query: { code: live.code },
      token: live.b,
      headers: { "last-event-id": "x1" },
    });
    expect([badHeader.status, badHeader.body.error]).toEqual([400, "bad_request"]);
    expect((await client.call("POST", "/v1/stream", { query: { code: live.code }, token: live.b })).status).toBe(405);
  });

  it("a third stream for one seat on one node ends the oldest with `end` reason replaced", async () => {
    const { client, room } = await pairedRoomOn(target);
    const first = await openStream(client, room.code, room.b, { node: 0 });
    const second = await openStream(client, room.code, room.b, { node: 0 });
    const third = await openStream(client, room.code, room.b, { node: 0 });
    try {
      expect((await first.event(0)).data).toEqual({ reason: "replaced" });
      await first.finished;
      const sent = await client.send(room.code, room.a, "to the two left");
      expect((await second.event(0)).id).toBe(sent.body.id);
      expect((await third.event(0)).id).toBe(sent.body.id);
    } finally {
      for (const stream of [first, second, third]) stream.close();
    }
  });

  it("a client that goes away frees its stream on the node", async () => {
    const { client, room } = await pairedRoomOn(target);
    const before = await openStreamsOn(client, 0);
    const stream = await openStream(client, room.code, room.b, { node: 0 });
    await until(async () => (await openStreamsOn(client, 0)) === before + 1, "the stream is counted");
    stream.close();
    await until(async () => (await openStreamsOn(client, 0)) === before, "the stream is freed");
    // The room is untouched: a new stream still works.
    const again = await openStream(client, room.code, room.b, { node: 0 });
    const sent = await client.send(room.code, room.a, "still here");
    expect((await again.event(0)).id).toBe(sent.body.id);
    again.close();
  });
});

describe.each(BEHAVIOUR_TARGETS)("stream on %s, node shutting down", (kind) => {
  it("ends every stream with `end` reason shutdown, so clients reconnect elsewhere", async () => {
    const relay = await startTarget(kind);
    let closed = false;
    try {
      const room = await relay.client.pairedRoom();
      const stream = await openStream(relay.client, room.code, room.b, { node: 0 });
      await until(async () => (await openStreamsOn(relay.client, 0)) === 1, "the stream is open");
      const closing = relay.close();
      closed = true;
      expect((await stream.event(0)).data).toEqual({ reason: "shutdown" });
      await stream.finished;
      await closing;
    } finally {
      if (!closed) await relay.close();
    }
  });
});
