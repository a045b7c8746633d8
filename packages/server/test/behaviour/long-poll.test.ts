// Long-poll recv: answers at once when something is pending, wakes on a send or a close,
// returns an empty list when the wait runs out, and frees its wait when the client leaves.
import { WAITERS_PER_SEAT } from "@duet/protocol";
import { forEachTarget, pairedRoomOn } from "../support/targets";

const elapsed = async <T>(work: Promise<T>) => {
  const started = Date.now();
  const result = await work;
  return { result, ms: Date.now() - started };
};

forEachTarget((target) => {
  it("wait=0 returns at once, even with nothing pending", async () => {
    const { client, room } = await pairedRoomOn(target);
    const { result, ms } = await elapsed(client.recv(room.code, room.a, 0));
    expect(result.body).toEqual({ messages: [] });
    expect(ms).toBeLessThan(1000);
  });

  it("returns at once when messages are already pending, whatever the wait", async () => {
    const { client, room } = await pairedRoomOn(target);
    await client.send(room.code, room.a, "waiting for you");
    const { result, ms } = await elapsed(client.recv(room.code, room.b, 25_000));
    expect(result.body.messages).toHaveLength(1);
    expect(ms).toBeLessThan(5000);
  });

  it("a waiting recv is woken by a send and returns it long before its wait ends", async () => {
    const { client, room } = await pairedRoomOn(target);
    const waiting = elapsed(client.recv(room.code, room.b, 20_000));
    await new Promise((r) => setTimeout(r, 200));
    const sent = await client.send(room.code, room.a, "wake up");
    const { result, ms } = await waiting;
    expect(result.body.messages).toEqual([{ id: sent.body.id, from: "a", text: "wake up" }]);
    expect(ms).toBeLessThan(10_000);
  });

  it("a waiting recv is not answered by a message in the other direction", async () => {
    const { client, room } = await pairedRoomOn(target);
    const waiting = elapsed(client.recv(room.code, room.b, 1500));
    await new Promise((r) => setTimeout(r, 200));
    await client.send(room.code, room.b, "b talks to a");
    const { result, ms } = await waiting;
    expect(result.body).toEqual({ messages: [] });
    expect(ms).toBeGreaterThanOrEqual(1400);
  });

  it("with nothing sent, returns an empty list when the wait runs out, not later than wait plus a margin", async () => {
    const { client, room } = await pairedRoomOn(target);
    const { result, ms } = await elapsed(client.recv(room.code, room.a, 1000));
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ messages: [] });
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(3000);
  });

  it("defaults the wait to 25000 ms (still waiting after 2 s, woken by a send)", async () => {
    const { client, room } = await pairedRoomOn(target);
    const waiting = elapsed(client.recv(room.code, room.b, "default"));
    await new Promise((r) => setTimeout(r, 2000));
    await client.send(room.code, room.a, "after two seconds");
    const { result, ms } = await waiting;
    expect(result.body.messages).toHaveLength(1);
    expect(ms).toBeGreaterThanOrEqual(1900);
  });

  it("a waiting recv gets 404 promptly when the peer closes the room", async () => {
    const { client, room } = await pairedRoomOn(target);
    const waiting = elapsed(client.recv(room.code, room.b, 20_000));
    await new Promise((r) => setTimeout(r, 200));
    expect((await client.close(room.code, room.a)).status).toBe(200);
    const { result, ms } = await waiting;
    expect(result.status).toBe(404);
    expect(result.body.error).toBe("not_found");
    expect(ms).toBeLessThan(10_000);
  });

  it("counts a waiting recv as peer activity", async () => {
    const { client, room } = await pairedRoomOn(target);
    const waiting = client.recv(room.code, room.b, 1000);
    expect((await client.status(room.code, room.a)).body.peer_active).toBe(true);
    await waiting;
  });

  it("a seat's waiting recvs (as many as a node holds of one seat) are all woken by one send", async () => {
    const { client, room } = await pairedRoomOn(target);
    // MAX_WAITERS_PER_SEAT: one more would answer the oldest at once (waiter-bounds.test.ts).
    const waiters = Array.from({ length: WAITERS_PER_SEAT }, () => client.recv(room.code, room.b, 20_000));
    await new Promise((r) => setTimeout(r, 300));
    await client.send(room.code, room.a, "to everyone");
    for (const reply of await Promise.all(waiters)) expect(reply.body.messages).toHaveLength(1);
  });
});
