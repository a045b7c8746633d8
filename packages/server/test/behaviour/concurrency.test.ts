// Races the atomic scripts must win: simultaneous sends into an empty room and
// simultaneous joins of one room.
import { forEachTarget, pairedRoomOn } from "../support/targets";

forEachTarget((target) => {
  it("50 simultaneous sends into an empty room accept exactly 8 and refuse 42 with mailbox_full", async () => {
    const { client, room } = await pairedRoomOn(target);
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.send(room.code, i % 2 ? room.a : room.b, `race ${i}`)),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(8);
    expect(replies.filter((r) => r.status === 429 && r.body.error === "mailbox_full")).toHaveLength(42);
    const pending = (await client.status(room.code, room.a)).body;
    expect(pending.pending_in + pending.pending_out).toBe(8);
  });

  it("20 simultaneous joins give exactly one seat b; the others get 409 full", async () => {
    const { client } = target();
    const opened = (await client.open()).body;
    const replies = await Promise.all(Array.from({ length: 20 }, () => client.join(opened.code)));
    const seated = replies.filter((r) => r.status === 200);
    expect(seated).toHaveLength(1);
    expect(seated[0]!.body.seat).toBe("b");
    expect(replies.filter((r) => r.status === 409 && r.body.error === "full")).toHaveLength(19);
  });

  it("the same idempotency key sent 20 times at once stores one message", async () => {
    const { client, room } = await pairedRoomOn(target);
    const replies = await Promise.all(
      Array.from({ length: 20 }, () => client.send(room.code, room.a, "once", "same-key")),
    );
    expect(new Set(replies.map((r) => r.body.id)).size).toBe(1);
    expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(1);
  });
});
