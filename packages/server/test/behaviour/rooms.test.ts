// Rooms: open, join, status, close and the public tally (docs/protocol.md §5 "Rooms", §11.1 "Stats").
import { forEachTarget, pairedRoomOn } from "../support/targets";
import { asClient } from "../support/workload";

const CODE = /^[0-9a-hjkmnp-tv-z]{4}-[0-9a-hjkmnp-tv-z]{4}-[0-9a-hjkmnp-tv-z]{4}$/;

forEachTarget((target) => {
  describe("open", () => {
    it("mints a code, seat a, a token of 256 bits, expires_in, join_url and a share block without the token", async () => {
      const { status, body } = await target().client.open();
      expect(status).toBe(200);
      expect(body.code).toMatch(CODE);
      expect(body.seat).toBe("a");
      expect(Buffer.from(body.token, "base64url").length).toBeGreaterThanOrEqual(32);
      expect(body.expires_in).toBe(1800);
      expect(body.join_url).toMatch(new RegExp(`/join/${body.code}$`));
      expect(body.share).toContain(body.code);
      expect(body.share).toContain(body.join_url);
      expect(body.share).toMatch(/if the duet skill is installed, use it to join this code/i);
      expect(body.share).toMatch(/otherwise read the join address/i);
      expect(body.share).not.toContain(body.token);
    });

    it("accepts an empty body and refuses unknown fields", async () => {
      expect((await target().client.call("POST", "/v1/open")).status).toBe(200);
      const refused = await target().client.call("POST", "/v1/open", { body: { name: "x" } });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toBe("bad_request");
    });

    it("gives every room its own code and token", async () => {
      const rooms = await Promise.all(Array.from({ length: 10 }, () => target().client.open()));
      expect(new Set(rooms.map((r) => r.body.code)).size).toBe(10);
      expect(new Set(rooms.map((r) => r.body.token)).size).toBe(10);
    });
  });

  describe("join", () => {
    it("gives seat b and its own token; peer_joined becomes true for both seats", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      expect((await client.status(opened.code, opened.token)).body.peer_joined).toBe(false);
      const joined = await client.join(opened.code);
      expect(joined.status).toBe(200);
      expect(joined.body).toEqual({
        code: opened.code,
        seat: "b",
        token: expect.any(String),
        expires_in: expect.any(Number),
      });
      expect(joined.body.token).not.toBe(opened.token);
      const forA = (await client.status(opened.code, opened.token)).body;
      const forB = (await client.status(opened.code, joined.body.token)).body;
      expect(forA).toMatchObject({ seat: "a", members: ["a", "b"], peer_joined: true });
      expect(forB).toMatchObject({ seat: "b", members: ["a", "b"], peer_joined: true });
    });

    it("answers a third join with 409 full and leaves the room unchanged", async () => {
      const { client, room } = await pairedRoomOn(target);
      const third = await client.join(room.code);
      expect(third.status).toBe(409);
      expect(third.body.error).toBe("full");
      expect((await client.status(room.code, room.b)).status).toBe(200);
    });

    it("answers an unknown code with 404 not_found and a malformed one with 400", async () => {
      const unknown = await target().client.join("zzzz-zzzz-zzzz");
      expect(unknown.status).toBe(404);
      expect(unknown.body.error).toBe("not_found");
      const malformed = await target().client.join("hello");
      expect(malformed.status).toBe(400);
      expect(malformed.body.error).toBe("bad_request");
    });

    it("normalises the code: case, spaces, missing or extra dashes", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const messy = ` ${opened.code.toUpperCase().replace(/-/g, "")}- `;
      const joined = await client.join(messy);
      expect(joined.status).toBe(200);
      expect(joined.body.code).toBe(opened.code);
      const sent = await client.send(`--${opened.code.replace(/-/g, " - ")}`, opened.token, "normalised");
      expect(sent.status).toBe(200);
    });
  });

  describe("status", () => {
    it("reports members, expires_in, peer_joined, peer_active and pending counts for the caller's seat", async () => {
      const { client, room } = await pairedRoomOn(target);
      const one = (await client.send(room.code, room.a, "one")).body.id;
      const two = (await client.send(room.code, room.a, "two")).body.id;
      const three = (await client.send(room.code, room.b, "three")).body.id;
      const forA = (await client.status(room.code, room.a)).body;
      expect(forA).toEqual({
        seat: "a",
        members: ["a", "b"],
        expires_in: expect.any(Number),
        peer_joined: true,
        peer_active: true,
        pending_in: 1,
        pending_out: 2,
        unread: [one, two],
      });
      expect(forA.expires_in).toBeGreaterThan(1790);
      expect(forA.expires_in).toBeLessThanOrEqual(1800);
      const forB = (await client.status(room.code, room.b)).body;
      expect(forB).toMatchObject({ seat: "b", pending_in: 2, pending_out: 1, unread: [three], peer_active: true });
    });

    it("a status that waited for the peer in vain reports the room as it is at its answer", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const waited = await client.call("GET", "/v1/status", {
        query: { code: opened.code, wait: 2500 },
        token: opened.token,
      });
      expect(waited.body).toMatchObject({ peer_joined: false });
      // Answered 2.5 s after it was read first: the room has 2.5 s less to live.
      expect(waited.body.expires_in).toBeLessThanOrEqual(opened.expires_in - 2);
    });

    it("shows peer_active false while nobody holds seat b", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      expect((await client.status(opened.code, opened.token)).body).toMatchObject({
        members: ["a"],
        peer_joined: false,
        peer_active: false,
      });
    });

    it("refuses unknown query fields and a wait out of bounds", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const queries: Record<string, string | number>[] = [
        { code: opened.code, timeout: 100 },
        { code: opened.code, wait: 25_001 },
        { code: opened.code, wait: "soon" },
      ];
      for (const query of queries) {
        expect((await client.call("GET", "/v1/status", { query, token: opened.token })).status).toBe(400);
      }
    });
  });

  describe("close", () => {
    it("with no unacked messages: ok true, then every call with the code answers 404", async () => {
      const { client, room } = await pairedRoomOn(target);
      const closed = await client.close(room.code, room.b);
      expect(closed.status).toBe(200);
      expect(closed.body).toEqual({ ok: true });
      for (const reply of [
        await client.status(room.code, room.a),
        await client.status(room.code, room.b),
        await client.send(room.code, room.a, "late"),
        await client.recv(room.code, room.a, 0),
        await client.ack(room.code, room.a, ["1"]),
        await client.close(room.code, room.a),
        await client.join(room.code),
      ]) {
        expect(reply.status).toBe(404);
        expect(reply.body.error).toBe("not_found");
      }
    });

    it("with unacked messages in either direction and force absent or false: 409 unread, room unchanged", async () => {
      const { client, room } = await pairedRoomOn(target);
      await client.send(room.code, room.b, "unread by a");
      for (const force of [undefined, false]) {
        const refused = await client.close(room.code, room.b, force);
        expect(refused.status).toBe(409);
        expect(refused.body.error).toBe("unread");
        const alsoRefused = await client.close(room.code, room.a, force);
        expect(alsoRefused.status).toBe(409);
      }
      expect((await client.recv(room.code, room.a, 0)).body.messages).toHaveLength(1);
    });

    it("with force true: gone, unread messages abandoned", async () => {
      const { client, room } = await pairedRoomOn(target);
      await client.send(room.code, room.a, "abandoned");
      expect((await client.close(room.code, room.a, true)).body).toEqual({ ok: true });
      expect((await client.recv(room.code, room.b, 0)).status).toBe(404);
    });

    it("works before the peer joined", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      expect((await client.close(opened.code, opened.token)).status).toBe(200);
      expect((await client.join(opened.code)).status).toBe(404);
    });
  });

  describe("stats", () => {
    it("counts sessions, paired rooms, messages and UTF-8 bytes, as integers, with no User-Agent needed", async () => {
      const { client } = target();
      const before = (await client.stats({ headers: { "user-agent": "curl/8.0" } })).body;
      const room = await client.pairedRoom();
      await client.open();
      await client.send(room.code, room.a, "héllo"); // 6 bytes
      await client.send(room.code, room.b, "€"); // 3 bytes
      await client.send(room.code, room.b, "refused", "k1");
      await client.send(room.code, room.b, "refused", "k1"); // a replay stores nothing new
      const after = await client.stats({ headers: { "user-agent": "curl/8.0" } });
      expect(after.status).toBe(200);
      expect(Object.keys(after.body).sort()).toEqual(["bytes", "messages", "paired", "rooms_open", "sessions"]);
      expect(after.body.sessions - before.sessions).toBe(2);
      expect(after.body.paired - before.paired).toBe(1);
      expect(after.body.messages - before.messages).toBe(3);
      expect(after.body.bytes - before.bytes).toBe(6 + 3 + 7);
      for (const value of Object.values(after.body)) expect(Number.isInteger(value)).toBe(true);
    });

    it("rooms_open is a live gauge: up on open, down on close", async () => {
      const { client } = target();
      // The tally reads every tag of the store (2,048 commands on a cluster): under load a
      // read can outlast the store's deadline and answer 503, which a client retries.
      const roomsOpen = async () => (await asClient(() => client.stats())).body.rooms_open;
      const before = await roomsOpen();
      const room = await client.pairedRoom();
      const other = (await client.open()).body;
      expect((await roomsOpen()) - before).toBe(2);
      await client.close(room.code, room.a);
      await client.close(other.code, other.token);
      expect((await roomsOpen()) - before).toBe(0);
    });
  });
});
