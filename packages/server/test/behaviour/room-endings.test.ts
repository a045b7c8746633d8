// How a room ended (docs/room-endings.md): for a while after the end, a call with one of
// the room's seat tokens gets 404 not_found with an `ended` object saying why; anyone else
// gets the bare 404 they always got. And the waiting status that `duet wait` uses.
import { randomBytes } from "node:crypto";
import { ERRORS } from "@duet/protocol";
import type { Reply, TestClient } from "../support/http-client";
import { forEachTarget, forEachTimedTarget, pairedRoomOn, type RelayTarget } from "../support/targets";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every seat-token call a client can make, each answered as it would be after the end. */
function everyCall(target: RelayTarget, code: string, token: string): Promise<Reply>[] {
  const { client } = target;
  return [
    client.status(code, token),
    client.recv(code, token, 0),
    client.send(code, token, "too late"),
    client.ack(code, token, ["1"]),
    client.close(code, token),
    client.close(code, token, true),
  ];
}

function expectEnded(reply: Reply, ended: Record<string, unknown>): void {
  expect(reply.status).toBe(404);
  expect(reply.body.error).toBe("not_found");
  expect(reply.body.ended).toEqual({ ...ended, at: expect.any(String) });
  expect(Number.isNaN(Date.parse(reply.body.ended.at))).toBe(false);
  expect(reply.body.message).toMatch(/^The room ended: /);
}

/** The 404 every stranger gets, exactly as before rooms told how they ended. */
function expectBare404(reply: Reply): void {
  expect(reply.status).toBe(404);
  expect(reply.body).toEqual({ error: "not_found", message: ERRORS.not_found.message });
}

describe("how a room ended", () => {
  forEachTarget((target) => {
    it("closed with everything read: both seats learn who closed it, on every call", async () => {
      const { client, room } = await pairedRoomOn(target);
      const id = (await client.send(room.code, room.a, "hello")).body.id;
      expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(1);
      await client.ack(room.code, room.b, [id]);
      const before = Date.now();
      expect((await client.close(room.code, room.a)).status).toBe(200);
      for (const token of [room.a, room.b]) {
        for (const reply of await Promise.all(everyCall(target(), room.code, token)))
          expectEnded(reply, { reason: "closed", by: "a" });
      }
      const ended = (await client.status(room.code, room.b)).body;
      // The relay's clock and this one agree to well within a minute.
      expect(Math.abs(Date.parse(ended.ended.at) - before)).toBeLessThan(60_000);
      expect(ended.message).toContain("your peer (seat a) closed it");
      expect((await client.status(room.code, room.a)).body.message).toContain("you (seat a) closed it");
    });

    it("a recv waiting when the peer closes gets the reason", async () => {
      const { client, room } = await pairedRoomOn(target);
      const waiting = client.recv(room.code, room.b, 20_000);
      await sleep(200);
      expect((await client.close(room.code, room.a)).status).toBe(200);
      // Had the close not woken it, the wait would have run out with 200 and no messages.
      expectEnded(await waiting, { reason: "closed", by: "a" });
    });

    it("closed with force: how many unacked messages were abandoned, in each direction, from each seat's side", async () => {
      const { client, room } = await pairedRoomOn(target);
      await client.send(room.code, room.a, "one");
      await client.send(room.code, room.a, "two");
      await client.send(room.code, room.b, "three");
      expect((await client.close(room.code, room.b)).status).toBe(409);
      expect((await client.close(room.code, room.b, true)).status).toBe(200);
      expectEnded(await client.status(room.code, room.b), {
        reason: "force_closed",
        by: "b",
        abandoned: { in: 2, out: 1 },
      });
      const seenByA = await client.recv(room.code, room.a, 0);
      expectEnded(seenByA, { reason: "force_closed", by: "b", abandoned: { in: 1, out: 2 } });
      expect(seenByA.body.message).toContain("your peer (seat b) closed it with force");
    });

    it("a force close that found nothing unread is a plain close", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect((await client.close(room.code, room.b, true)).status).toBe(200);
      expectEnded(await client.status(room.code, room.a), { reason: "closed", by: "b" });
    });

    it("a room closed before anyone joined tells its opener", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      expect((await client.close(opened.code, opened.token)).status).toBe(200);
      expectEnded(await client.status(opened.code, opened.token), { reason: "closed", by: "a" });
    });

    it("is documented in the recipe and the OpenAPI document", async () => {
      const { client } = target();
      const recipe = (await client.call("GET", "/v1/api")).text;
      expect(recipe).toContain("### How a room ended");
      expect(recipe).toContain("For 10 minutes after a room ends");
      expect(recipe).toContain("status?code=k7dq-3mxa-9z2f&wait=");
      const openapi = (await client.call("GET", "/v1/openapi.json")).body;
      expect(openapi.components.schemas.Error.properties.ended.properties.reason.enum).toEqual([
        "closed",
        "force_closed",
        "idle_timeout",
        "hard_cap",
      ]);
      expect(openapi.paths["/v1/status"].get.parameters.map((p: { name: string }) => p.name)).toEqual([
        "code",
        "wait",
        "until_read",
      ]);
      expect(openapi.paths["/v1/recv"].get.responses["404"].description).toContain("`ended`");
    });

    it("is for members only: a stranger's token, another room's token or a join gets the bare 404", async () => {
      const { client, room } = await pairedRoomOn(target);
      const other = await client.pairedRoom();
      expect((await client.close(room.code, room.a)).status).toBe(200);
      const stranger = randomBytes(32).toString("base64url");
      for (const token of [stranger, other.a]) {
        for (const reply of await Promise.all(everyCall(target(), room.code, token))) expectBare404(reply);
      }
      expectBare404(await client.join(room.code));
      // The other room is untouched.
      expect((await client.status(other.code, other.b)).status).toBe(200);
    });
  });
});

describe("how a room ended: expiry", () => {
  describe("idle", () => {
    forEachTimedTarget({ ROOM_IDLE_SECONDS: "2", ROOM_MAX_SECONDS: "60" }, (target) => {
      it("a room nobody used for its idle lifetime says it expired idle", async () => {
        const { client, room } = await pairedRoomOn(target);
        await sleep(2300);
        for (const token of [room.a, room.b]) {
          for (const reply of await Promise.all(everyCall(target(), room.code, token)))
            expectEnded(reply, { reason: "idle_timeout" });
        }
        expectBare404(await client.status(room.code, randomBytes(32).toString("base64url")));
      });

      it("a recv waiting through the idle deadline gets the reason", async () => {
        const { client, room } = await pairedRoomOn(target);
        expectEnded(await client.recv(room.code, room.a, 20_000), { reason: "idle_timeout" });
      });
    });
  });

  describe("hard cap", () => {
    forEachTimedTarget({ ROOM_IDLE_SECONDS: "60", ROOM_MAX_SECONDS: "3" }, (target) => {
      it("a room kept busy until its hard cap says it reached the cap", async () => {
        const { client, room } = await pairedRoomOn(target);
        let reply = await client.status(room.code, room.a);
        for (
          const deadline = Date.now() + 6000;
          reply.status === 200 && Date.now() < deadline;
          reply = await client.status(room.code, room.a)
        ) {
          await sleep(200);
        }
        expectEnded(reply, { reason: "hard_cap" });
        expectEnded(await client.recv(room.code, room.b, 0), { reason: "hard_cap" });
      });
    });
  });
});

describe("how long the reason is kept", () => {
  forEachTimedTarget({ ROOM_ENDING_KEEP_SECONDS: "1" }, (target) => {
    it("after ROOM_ENDING_KEEP_SECONDS even the room's own seats get the bare 404", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect((await client.close(room.code, room.a)).status).toBe(200);
      expectEnded(await client.status(room.code, room.b), { reason: "closed", by: "a" });
      await sleep(1300);
      expectBare404(await client.status(room.code, room.b));
      expectBare404(await client.status(room.code, room.a));
    });
  });
});

describe("with ROOM_ENDING_KEEP_SECONDS=0", () => {
  forEachTarget(
    (target) => {
      it("every call after the end gets the bare 404, as before rooms told how they ended", async () => {
        const { client, room } = await pairedRoomOn(target);
        await client.send(room.code, room.a, "abandoned");
        expect((await client.close(room.code, room.b, true)).status).toBe(200);
        for (const token of [room.a, room.b]) {
          for (const reply of await Promise.all(everyCall(target(), room.code, token))) expectBare404(reply);
        }
      });
    },
    { env: { ROOM_ENDING_KEEP_SECONDS: "0" } },
  );
});

/** GET /v1/status?wait=: the waiting status `duet wait` uses. */
const statusWait = (client: TestClient, code: string, token: string, wait: number, node?: number) =>
  client.call("GET", "/v1/status", { query: { code, wait }, token, node });

describe("waiting status (GET /v1/status?wait=)", () => {
  forEachTarget((target) => {
    it("answers when the peer joins, even through another node", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const waiting = statusWait(client, opened.code, opened.token, 20_000, 0);
      await sleep(300);
      expect((await client.join(opened.code, { node: 1 })).status).toBe(200);
      // Had the join not woken it, the wait would have run out with peer_joined false.
      const reply = await waiting;
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({ seat: "a", members: ["a", "b"], peer_joined: true });
    });

    it("answers at once when the peer has joined already", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (const token of [room.a, room.b]) {
        const reply = await statusWait(client, room.code, token, 25_000);
        expect(reply.body.peer_joined).toBe(true);
      }
    });

    it("answers peer_joined false when the wait runs out", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const reply = await statusWait(client, opened.code, opened.token, 300);
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({ members: ["a"], peer_joined: false });
    });

    it("a waiting status gets the reason when the room is closed", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const waiting = statusWait(client, opened.code, opened.token, 20_000, 0);
      await sleep(300);
      expect((await client.close(opened.code, opened.token, false, { node: 1 })).status).toBe(200);
      expectEnded(await waiting, { reason: "closed", by: "a" });
    });
  });
});
