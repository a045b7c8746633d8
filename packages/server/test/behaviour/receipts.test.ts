// Read receipts (docs/protocol.md §6.6): a message is read when the peer acks it, and the
// sender learns it from status's `unread`, from a status wait with until_read, and from a
// `read` event on its stream, wherever the ack lands (consecutive calls go to different
// nodes on the multi-node targets). Every target.
import { forEachTarget, pairedRoomOn } from "../support/targets";
import type { TestClient } from "../support/http-client";
import { until, waitingOn } from "../support/waiting";
import { openStream } from "../support/stream-client";

const statusUntilRead = (client: TestClient, code: string, token: string, id: string, wait: number, node?: number) =>
  client.call("GET", "/v1/status", { query: { code, wait, until_read: id }, token, node });

forEachTarget((target) => {
  it("status lists the caller's unread ids oldest first, pending_out is their number, and an ack removes them", async () => {
    const { client, room } = await pairedRoomOn(target);
    const ids = await client.sendEach(room.code, room.a, ["one", "two", "three"]);
    const fromB = (await client.send(room.code, room.b, "from b")).body.id;
    expect((await client.status(room.code, room.a)).body).toMatchObject({ pending_out: 3, pending_in: 1, unread: ids });
    expect((await client.status(room.code, room.b)).body).toMatchObject({ pending_out: 1, unread: [fromB] });
    expect((await client.ack(room.code, room.b, [ids[1]!, ids[0]!])).body).toEqual({ ok: true, acked: 2 });
    expect((await client.status(room.code, room.a)).body).toMatchObject({ pending_out: 1, unread: [ids[2]] });
    await client.ack(room.code, room.b, [ids[2]!]);
    expect((await client.status(room.code, room.a)).body).toMatchObject({ pending_out: 0, unread: [] });
    // A room nobody wrote in.
    const quiet = await client.pairedRoom();
    expect((await client.status(quiet.code, quiet.a)).body.unread).toEqual([]);
  });

  it("a status wait with until_read is woken by the peer's ack on another node, and answers read", async () => {
    const { client, room } = await pairedRoomOn(target);
    const id = (await client.send(room.code, room.a, "please read")).body.id;
    const before = await waitingOn(client, 1);
    const waiting = statusUntilRead(client, room.code, room.a, id, 15_000, 1);
    await until(async () => (await waitingOn(client, 1)) > before, "the status waits");
    await client.recv(room.code, room.b, 0, { node: 2 });
    expect((await client.ack(room.code, room.b, [id], { node: 2 })).body.acked).toBe(1);
    // Had the ack not woken it, the wait would run out and answer what it read before the ack.
    const answer = await waiting;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ seat: "a", unread: [], pending_out: 0 });
  });

  it("until_read answers at once when nothing up to the id is unread; later unread ids do not hold it", async () => {
    const { client, room } = await pairedRoomOn(target);
    const first = (await client.send(room.code, room.a, "first")).body.id;
    const second = (await client.send(room.code, room.a, "second")).body.id;
    await client.ack(room.code, room.b, [first]);
    // Waits of 25 s that must answer now: the test's 30 s timeout would catch a wait.
    expect((await statusUntilRead(client, room.code, room.a, first, 25_000)).body).toMatchObject({ unread: [second] });
    // An id the peer never got, below every unread one (ids compare as numbers).
    expect((await statusUntilRead(client, room.code, room.a, "1", 25_000)).body.unread).toEqual([second]);
    // wait=0: the current status, read or not.
    expect((await statusUntilRead(client, room.code, room.a, second, 0)).body.unread).toEqual([second]);
  });

  it("until_read that runs out answers 200 with the current status: the id still unread", async () => {
    const { client, room } = await pairedRoomOn(target);
    const id = (await client.send(room.code, room.a, "nobody reads this")).body.id;
    const answer = await statusUntilRead(client, room.code, room.a, id, 300);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ unread: [id], pending_out: 1 });
  });

  it("a status wait with until_read gets 404 with how the room ended when the peer closes it", async () => {
    const { client, room } = await pairedRoomOn(target);
    const id = (await client.send(room.code, room.a, "unread when closed")).body.id;
    const before = await waitingOn(client, 0);
    const waiting = statusUntilRead(client, room.code, room.a, id, 15_000, 0);
    await until(async () => (await waitingOn(client, 0)) > before, "the status waits");
    expect((await client.close(room.code, room.b, true, { node: 1 })).status).toBe(200);
    const answer = await waiting;
    expect(answer.status).toBe(404);
    expect(answer.body.ended).toEqual({
      reason: "force_closed",
      by: "b",
      abandoned: { in: 0, out: 1 },
      at: expect.any(String),
    });
  });

  it("until_read must be a message id: 1 to 15 digits, else 400", async () => {
    const { client, room } = await pairedRoomOn(target);
    for (const bad of ["abc", "-1", "1.5", "1234567890123456", ""]) {
      const answer = await statusUntilRead(client, room.code, room.a, bad, 0);
      expect([answer.status, answer.body.error, bad]).toEqual([400, "bad_request", bad]);
      expect(answer.body.message).toContain("until_read");
    }
  });

  it("the sender's stream gets one `read` event per ack naming the ids it deleted, oldest first, without an id: line (Last-Event-ID stays the last message's)", async () => {
    const { client, room } = await pairedRoomOn(target);
    const stream = await openStream(client, room.code, room.a, { node: 0 });
    try {
      const ids: string[] = [];
      for (const text of ["r1", "r2", "r3"])
        ids.push((await client.send(room.code, room.a, text, undefined, { node: 1 })).body.id);
      // Listed newest first, with an unknown id: the event names what was deleted, oldest first.
      await client.ack(room.code, room.b, [ids[2]!, "999999999999", ids[0]!], { node: 2 });
      expect(await stream.event(0)).toEqual({ event: "read", id: undefined, data: { ids: [ids[0], ids[2]] } });
      // An ack that deletes nothing sends no receipt; a receipt for the other seat's messages
      // is not this stream's. Events on a room arrive in order: either would come before the next one.
      await client.ack(room.code, room.b, [ids[0]!], { node: 1 });
      const fromB = (await client.send(room.code, room.b, "from b", undefined, { node: 2 })).body.id;
      expect((await stream.event(1)).data).toEqual({ id: fromB, from: "b", text: "from b" });
      await client.ack(room.code, room.a, [fromB], { node: 1 });
      await client.ack(room.code, room.b, [ids[1]!], { node: 2 });
      expect((await stream.event(2)).data).toEqual({ ids: [ids[1]] });
      expect(stream.events.map((e) => e.event)).toEqual(["read", "message", "read"]);
    } finally {
      stream.close();
    }
  });

  it('NDJSON: {"event":"read","ids":[…]}, and receipts work in an encrypted room (ids only)', async () => {
    const { client } = target();
    const opened = await client.open({ body: { e2e: true } });
    const joined = await client.join(opened.body.code);
    const code = opened.body.code;
    const stream = await openStream(client, code, opened.body.token, { format: "ndjson", node: 1 });
    try {
      const envelope = `duet-e2e:v1:${Buffer.alloc(16).toString("base64")}:${Buffer.from("x").toString("base64")}:${Buffer.alloc(32).toString("base64")}`;
      const sent = await client.send(code, opened.body.token, envelope, undefined, { node: 0 });
      expect(sent.status).toBe(200);
      await client.ack(code, joined.body.token, [sent.body.id], { node: 2 });
      expect(await stream.event(0)).toEqual({ event: "read", id: undefined, data: { ids: [sent.body.id] } });
      expect(JSON.parse(stream.raw().trim())).toEqual({ event: "read", ids: [sent.body.id] });
      expect(stream.raw()).not.toContain(envelope);
    } finally {
      stream.close();
    }
  });
});
