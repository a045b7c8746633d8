// The read receipt folded into recv and send (docs/protocol.md, "Acks folded into recv and
// send"): `ack` on GET /v1/recv (ack=12,13) and on POST /v1/send (ack: ["12"]) acks those ids
// exactly as POST /v1/ack would, before the call reads, waits or sends; a refused send keeps
// the ack. Consecutive calls go to different nodes on the multi-node targets. Every target.
import { MAX_ACK_IDS } from "@duet/protocol";
import { forEachTarget, pairedRoomOn } from "../support/targets";
import type { TestClient } from "../support/http-client";
import { until, waitingOn } from "../support/waiting";
import { openStream } from "../support/stream-client";

const recvAcking = (client: TestClient, code: string, token: string, ack: string, wait = 0, node?: number) =>
  client.call("GET", "/v1/recv", { query: { code, wait, ack }, token, node });

const sendAcking = (client: TestClient, code: string, token: string, text: string, ack: unknown, key?: string) =>
  client.call("POST", "/v1/send", {
    body: { code, text, ack, ...(key === undefined ? {} : { idempotency_key: key }) },
    token,
  });

forEachTarget((target) => {
  it("recv with ack=<ids> acks them before it reads: the answer holds the rest, and the sender's unread drops them", async () => {
    const { client, room } = await pairedRoomOn(target);
    const ids = await client.sendEach(room.code, room.a, ["one", "two", "three"]);
    const first = await recvAcking(client, room.code, room.b, "");
    // An empty list is no list: a bad request, nothing acked.
    expect([first.status, first.body.error]).toEqual([400, "bad_request"]);
    expect((await client.status(room.code, room.a)).body.unread).toEqual(ids);

    // Listed out of order, with an unknown id and one twice: ignored as POST /v1/ack ignores them.
    const answer = await recvAcking(client, room.code, room.b, `${ids[1]},999999999999,${ids[0]},${ids[1]}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ messages: [{ id: ids[2], from: "a", text: "three" }] });
    expect((await client.status(room.code, room.a)).body).toMatchObject({ unread: [ids[2]], pending_out: 1 });
    // The same ack again is safe.
    expect((await recvAcking(client, room.code, room.b, `${ids[0]},${ids[1]}`)).body.messages).toHaveLength(1);
    expect((await recvAcking(client, room.code, room.b, ids[2]!)).body).toEqual({ messages: [] });
    expect((await client.status(room.code, room.a)).body.unread).toEqual([]);
  });

  it("a waiting recv acks before it waits: the sender's until_read wait answers while the recv still waits", async () => {
    const { client, room } = await pairedRoomOn(target);
    const id = (await client.send(room.code, room.a, "read me")).body.id;
    const before = await waitingOn(client, 0);
    const read = client.call("GET", "/v1/status", {
      query: { code: room.code, wait: 20_000, until_read: id },
      token: room.a,
      node: 0,
    });
    await until(async () => (await waitingOn(client, 0)) > before, "the status waits");
    const waitingRecv = recvAcking(client, room.code, room.b, id, 20_000, 1);
    // Had the ack waited for the recv's end, the status wait would still be waiting here.
    expect((await read).body).toMatchObject({ unread: [], pending_out: 0 });
    // The recv is still waiting, for the next message.
    const next = (await client.send(room.code, room.a, "next", undefined, { node: 2 })).body.id;
    expect((await waitingRecv).body).toEqual({ messages: [{ id: next, from: "a", text: "next" }] });
  });

  it("send with ack acks the messages it answers first: the receipt reaches the sender's stream, and frees a full mailbox", async () => {
    const { client, room } = await pairedRoomOn(target);
    const stream = await openStream(client, room.code, room.a, { format: "ndjson", node: 0 });
    try {
      // A fills the mailbox: a plain reply from B would be refused mailbox_full.
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push((await client.send(room.code, room.a, `q${i}`)).body.id);
      expect((await client.send(room.code, room.b, "no room")).body.error).toBe("mailbox_full");
      const reply = await sendAcking(client, room.code, room.b, "answer to q0", [ids[0]]);
      expect(reply.status).toBe(200);
      expect((await stream.event(0)).data).toEqual({ ids: [ids[0]] });
      expect((await client.status(room.code, room.a)).body).toMatchObject({ unread: ids.slice(1), pending_in: 1 });
      expect((await client.recv(room.code, room.a)).body.messages).toEqual([
        { id: reply.body.id, from: "b", text: "answer to q0" },
      ]);
    } finally {
      stream.close();
    }
  });

  it("a send refused after its ack keeps the ack (a retry is safe); a malformed ack refuses the send before anything", async () => {
    const { client, room } = await pairedRoomOn(target);
    const [q1, q2] = [
      (await client.send(room.code, room.a, "q1")).body.id,
      (await client.send(room.code, room.a, "q2")).body.id,
    ];
    expect((await sendAcking(client, room.code, room.b, "first", [], "k1")).status).toBe(200);
    // The same key with another text: refused by the store, after the ack landed.
    const conflict = await sendAcking(client, room.code, room.b, "other", [q1], "k1");
    expect([conflict.status, conflict.body.error]).toEqual([409, "idempotency_conflict"]);
    expect((await client.status(room.code, room.a)).body.unread).toEqual([q2]);

    for (const bad of ["12", [""], Array.from({ length: MAX_ACK_IDS + 1 }, (_, i) => String(i + 1)), [12]]) {
      const refused = await sendAcking(client, room.code, room.b, "never sent", bad);
      expect([refused.status, refused.body.error]).toEqual([400, "bad_request"]);
      expect(refused.body.message).toContain("ack");
    }
    const tooMany = Array.from({ length: MAX_ACK_IDS + 1 }, (_, i) => String(i + 1)).join(",");
    expect((await recvAcking(client, room.code, room.b, tooMany)).status).toBe(400);
    // Nothing of the refused calls was sent or acked.
    expect((await client.status(room.code, room.a)).body).toMatchObject({ unread: [q2], pending_in: 1 });
  });

  it("an ack with a wrong token or on an ended room is refused like the call itself, and acks nothing", async () => {
    const { client, room } = await pairedRoomOn(target);
    const id = (await client.send(room.code, room.a, "q")).body.id;
    const wrong = await recvAcking(client, room.code, "not-a-token", id);
    expect([wrong.status, wrong.body.error]).toEqual([401, "unauthorized"]);
    const wrongSend = await sendAcking(client, room.code, "not-a-token", "x", [id]);
    expect([wrongSend.status, wrongSend.body.error]).toEqual([401, "unauthorized"]);
    expect((await client.status(room.code, room.a)).body.unread).toEqual([id]);
    await client.close(room.code, room.a, true);
    const ended = await recvAcking(client, room.code, room.b, id);
    expect([ended.status, ended.body.error, ended.body.ended?.reason]).toEqual([404, "not_found", "force_closed"]);
  });
});
