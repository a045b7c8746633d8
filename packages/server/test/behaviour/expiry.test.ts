// Lifetimes, shortened by configuration: 30 minutes idle and 30 minutes from open become
// seconds here. Every authenticated call moves the idle deadline, never past the hard cap.
import { forEachTimedTarget, pairedRoomOn } from "../support/targets";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("idle timeout", () => {
  // Idle for 5 s: an open and a join fit well inside it on a busy machine (2 s did not).
  forEachTimedTarget({ ROOM_IDLE_SECONDS: "5", ROOM_MAX_SECONDS: "60" }, (target) => {
    it("ends a room with no authenticated activity: later calls get 404, not 401", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect(room.opened.expires_in).toBe(5);
      await sleep(5300);
      for (const reply of [
        await client.status(room.code, room.a),
        await client.send(room.code, room.b, "late"),
        await client.join(room.code),
      ]) {
        expect(reply.status).toBe(404);
        expect(reply.body.error).toBe("not_found");
      }
    });

    it("a recv waiting through the idle deadline gets 404 promptly (waiting is not activity)", async () => {
      const { client, room } = await pairedRoomOn(target);
      const started = Date.now();
      const reply = await client.recv(room.code, room.a, 20_000);
      expect(reply.status).toBe(404);
      // Well before the recv's own 20 s: the wait did not keep the room alive.
      expect(Date.now() - started).toBeLessThan(15_000);
    });
  });
});

describe("idle timeout, moved", () => {
  forEachTimedTarget({ ROOM_IDLE_SECONDS: "10", ROOM_MAX_SECONDS: "60" }, (target) => {
    it("is moved by every authenticated call: each one puts the whole idle lifetime ahead again", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (let i = 0; i < 3; i++) {
        // 2.5 s or more since the last call: unmoved, the room would have 8 s left or less.
        await sleep(2500);
        const status = await client.status(room.code, i % 2 ? room.a : room.b);
        expect(status.status).toBe(200);
        expect(status.body.expires_in).toBe(10);
      }
      expect((await client.recv(room.code, room.a, 0)).status).toBe(200);
    });
  });
});

describe("hard cap", () => {
  forEachTimedTarget({ ROOM_IDLE_SECONDS: "60", ROOM_MAX_SECONDS: "3" }, (target) => {
    it("ends a room at its hard cap even while it is busy", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect(room.opened.expires_in).toBe(3);
      let last = 200;
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && last === 200) {
        const status = await client.status(room.code, room.a);
        last = status.status;
        if (last === 200) expect(status.body.expires_in).toBeLessThanOrEqual(3);
        await sleep(250);
      }
      expect(last).toBe(404);
    });
  });
});

describe("tally of expired rooms", () => {
  // Idle for 5 s: the open and join, then the first stats call, fit well inside it on a busy machine.
  forEachTimedTarget({ ROOM_IDLE_SECONDS: "5", ROOM_MAX_SECONDS: "60" }, (target) => {
    it("an expired room leaves rooms_open and counts in duet_store_rooms_expired", async () => {
      const { client } = target();
      const metric = async (name: string) =>
        Number(new RegExp(`^${name} (\\d+)`, "m").exec((await client.metrics(0)).text)?.[1]);
      const openBefore = (await client.stats()).body.rooms_open;
      const expiredBefore = await metric("duet_store_rooms_expired");
      await client.pairedRoom();
      expect((await client.stats()).body.rooms_open - openBefore).toBe(1);
      // Then it expires (5 s idle): wait for that event, not for a time (a hang guard bounds it).
      let open = 1;
      while (open !== 0) {
        await sleep(250);
        open = (await client.stats()).body.rooms_open - openBefore;
      }
      expect((await metric("duet_store_rooms_expired")) - expiredBefore).toBe(1);
    });
  });
});
