// Messages: send, recv (never consumes), ack (deletes), idempotency and the mailbox limits
// (docs/protocol.md §6 "Messages", §7 "Idempotency", §8 "Limits").
import { MAX_PENDING_BYTES, MAX_TEXT_BYTES } from "@duet/protocol";
import { forEachTarget, pairedRoomOn } from "../support/targets";

forEachTarget((target) => {
  describe("send and recv", () => {
    it("delivers text to the peer with id, from and text, oldest first", async () => {
      const { client, room } = await pairedRoomOn(target);
      const ids = await client.sendEach(room.code, room.a, ["first", "second ✓", "third 🎉"]);
      expect(new Set(ids).size).toBe(3);
      const received = await client.recv(room.code, room.b, 0);
      expect(received.status).toBe(200);
      expect(received.body).toEqual({
        messages: [
          { id: ids[0], from: "a", text: "first" },
          { id: ids[1], from: "a", text: "second ✓" },
          { id: ids[2], from: "a", text: "third 🎉" },
        ],
      });
      expect((await client.recv(room.code, room.a, 0)).body).toEqual({ messages: [] });
    });

    it("mints ids of digits that increase in the order sent, across both seats and acks (docs/protocol.md §2; lost writes: integration/lost-writes)", async () => {
      const { client, room } = await pairedRoomOn(target);
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        const sender = i % 2 === 0 ? room.a : room.b;
        ids.push((await client.send(room.code, sender, `m${i}`)).body.id);
        // Acked messages leave the room; their ids are still never minted again.
        await client.ack(room.code, i % 2 === 0 ? room.b : room.a, [ids[i]!]);
      }
      for (const id of ids) expect(id).toMatch(/^[1-9][0-9]{0,14}$/);
      const numbers = ids.map(Number);
      for (let i = 1; i < numbers.length; i++) expect(numbers[i]!).toBeGreaterThan(numbers[i - 1]!);
    });

    it("accepts a send before the peer has joined; the message waits for it", async () => {
      const { client } = target();
      const opened = (await client.open()).body;
      const sent = await client.send(opened.code, opened.token, "early");
      expect(sent.status).toBe(200);
      const joined = (await client.join(opened.code)).body;
      expect((await client.recv(opened.code, joined.token, 0)).body.messages).toEqual([
        { id: sent.body.id, from: "a", text: "early" },
      ]);
    });

    it("recv does not consume: the same messages come back until acked", async () => {
      const { client, room } = await pairedRoomOn(target);
      await client.send(room.code, room.b, "stay");
      const first = await client.recv(room.code, room.a, 0);
      const second = await client.recv(room.code, room.a, 0);
      expect(second.body).toEqual(first.body);
      expect(first.body.messages).toHaveLength(1);
    });

    it("keeps text exactly: control characters, quotes, every plane of Unicode", async () => {
      const { client, room } = await pairedRoomOn(target);
      const text = 'line1\nline2\t"quoted" \\ \u0000\u0001 \u2028 é 中文 𝄞 😀';
      await client.send(room.code, room.a, text);
      expect((await client.recv(room.code, room.b, 0)).body.messages[0].text).toBe(text);
    });

    // The in-process store once dropped a leading U+FEFF (its Lua VM decoded strings as a
    // file, BOM stripped): each text here must come back as sent, on every store.
    it("keeps a leading U+FEFF, NULs and 4-byte characters at either end, and a 2 MiB text that starts with U+FEFF", async () => {
      const { client, room } = await pairedRoomOn(target);
      const texts = [
        "\ufeffbom first",
        "\ufeff",
        "\ufeff\ufeffx\ufeff",
        "\u0000nul first and last\u0000",
        "😀",
        "\u{10ffff}\ufffe\uffff",
        `\ufeff${"x".repeat(MAX_TEXT_BYTES - 3)}`, // U+FEFF is 3 bytes: exactly the limit
      ];
      const ids: string[] = [];
      for (const [i, text] of texts.entries()) {
        const sent = await client.send(room.code, room.a, text, `edge-${i}`);
        expect(sent.status).toBe(200);
        ids.push(sent.body.id);
        // A retry with the same key and text is the same send (its digest is of the text as sent).
        const again = await client.send(room.code, room.a, text, `edge-${i}`);
        expect(again.body).toMatchObject({ id: sent.body.id });
        const messages = (await client.recv(room.code, room.b, 0)).body.messages as { id: string; text: string }[];
        // Compared whole, reported short (a 2 MiB diff helps nobody).
        const shown = JSON.stringify(text.slice(0, 24));
        expect(
          messages.map((m) => ({ id: m.id, text: m.text === text ? shown : JSON.stringify(m.text.slice(0, 24)) })),
        ).toEqual([{ id: sent.body.id, text: shown }]);
        await client.ack(room.code, room.b, [sent.body.id]);
      }
      expect(new Set(ids).size).toBe(texts.length);
    });

    it("refuses empty text with 400 bad_request", async () => {
      const { client, room } = await pairedRoomOn(target);
      const reply = await client.send(room.code, room.a, "");
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe("bad_request");
    });
  });

  describe("ack", () => {
    it("deletes the listed messages and answers ok with the number deleted", async () => {
      const { client, room } = await pairedRoomOn(target);
      const one = (await client.send(room.code, room.a, "one")).body.id;
      const two = (await client.send(room.code, room.a, "two")).body.id;
      const acked = await client.ack(room.code, room.b, [one]);
      expect(acked.status).toBe(200);
      expect(acked.body).toEqual({ ok: true, acked: 1 });
      expect((await client.recv(room.code, room.b, 0)).body.messages.map((m: { id: string }) => m.id)).toEqual([two]);
      expect((await client.status(room.code, room.a)).body.pending_out).toBe(1);
    });

    it("is idempotent: unknown, repeated and already-acked ids are ignored", async () => {
      const { client, room } = await pairedRoomOn(target);
      const id = (await client.send(room.code, room.a, "once")).body.id;
      expect((await client.ack(room.code, room.b, [id, id, "999999999"])).body).toEqual({ ok: true, acked: 1 });
      expect((await client.ack(room.code, room.b, [id])).body).toEqual({ ok: true, acked: 0 });
      expect((await client.ack(room.code, room.b, [])).body).toEqual({ ok: true, acked: 0 });
    });

    it("only deletes messages addressed to the caller", async () => {
      const { client, room } = await pairedRoomOn(target);
      const toB = (await client.send(room.code, room.a, "for b")).body.id;
      expect((await client.ack(room.code, room.a, [toB])).body).toEqual({ ok: true, acked: 0 });
      expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(1);
    });
  });

  describe("idempotency_key", () => {
    it("the same key and text return the same id and store nothing new, even after ack", async () => {
      const { client, room } = await pairedRoomOn(target);
      const first = await client.send(room.code, room.a, "retry me", "key-1");
      const again = await client.send(room.code, room.a, "retry me", "key-1");
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(first.body.id);
      expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(1);
      await client.ack(room.code, room.b, [first.body.id]);
      const afterAck = await client.send(room.code, room.a, "retry me", "key-1");
      expect(afterAck.body.id).toBe(first.body.id);
      expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(0);
    });

    it("the same key with a different text is 409 idempotency_conflict", async () => {
      const { client, room } = await pairedRoomOn(target);
      await client.send(room.code, room.a, "original", "key-2");
      const conflict = await client.send(room.code, room.a, "changed", "key-2");
      expect(conflict.status).toBe(409);
      expect(conflict.body.error).toBe("idempotency_conflict");
    });

    it("is scoped to the sender's seat: the peer may use the same key", async () => {
      const { client, room } = await pairedRoomOn(target);
      const fromA = await client.send(room.code, room.a, "same", "shared-key");
      const fromB = await client.send(room.code, room.b, "same", "shared-key");
      expect(fromB.status).toBe(200);
      expect((await client.recv(room.code, room.a, 0)).body.messages).toEqual([
        { id: fromB.body.id, from: "b", text: "same" },
      ]);
      expect(fromA.body.id).not.toBe(fromB.body.id);
    });

    it("a refused send leaves no record, so its retry may succeed", async () => {
      const { client, room } = await pairedRoomOn(target);
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push((await client.send(room.code, room.a, `m${i}`)).body.id);
      const refused = await client.send(room.code, room.a, "ninth", "key-9");
      expect(refused.status).toBe(429);
      await client.ack(room.code, room.b, [ids[0]!]);
      const retried = await client.send(room.code, room.a, "ninth", "key-9");
      expect(retried.status).toBe(200);
    });

    it("accepts 1 to 128 visible ASCII characters and refuses anything else with 400", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect((await client.send(room.code, room.a, "x", "!")).status).toBe(200);
      expect((await client.send(room.code, room.a, "y", "~".repeat(128))).status).toBe(200);
      for (const bad of ["", "a".repeat(129), "has space", "tab\there", "é"]) {
        const reply = await client.send(room.code, room.a, "z", bad);
        expect(reply.status).toBe(400);
        expect(reply.body.error).toBe("bad_request");
      }
    });
  });

  describe("limits", () => {
    it(`accepts a text of exactly ${MAX_TEXT_BYTES} UTF-8 bytes and refuses one byte more with 400 too_large`, async () => {
      const { client, room } = await pairedRoomOn(target);
      const exact = "é".repeat(MAX_TEXT_BYTES / 2); // 2 bytes each
      const accepted = await client.send(room.code, room.a, exact);
      expect(accepted.status).toBe(200);
      const received = await client.recv(room.code, room.b, 0);
      expect(received.body.messages[0].text).toBe(exact);
      await client.ack(room.code, room.b, [accepted.body.id]);
      const over = await client.send(room.code, room.a, `${exact}x`);
      expect(over.status).toBe(400);
      expect(over.body.error).toBe("too_large");
    });

    it("counts bytes after JSON parsing: an escaped text of 2 MiB fits the body limit", async () => {
      const { client, room } = await pairedRoomOn(target);
      const text = "\u0001".repeat(MAX_TEXT_BYTES); // 6 bytes of JSON per character
      const sent = await client.send(room.code, room.a, text);
      expect(sent.status).toBe(200);
    });

    it("holds at most 8 unacked messages room-wide (both directions); the 9th is 429 mailbox_full", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (let i = 0; i < 5; i++) expect((await client.send(room.code, room.a, `a${i}`)).status).toBe(200);
      for (let i = 0; i < 3; i++) expect((await client.send(room.code, room.b, `b${i}`)).status).toBe(200);
      for (const seat of [room.a, room.b]) {
        const full = await client.send(room.code, seat, "ninth");
        expect(full.status).toBe(429);
        expect(full.body.error).toBe("mailbox_full");
        expect(Number(full.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      }
      const pending = (await client.recv(room.code, room.b, 0)).body.messages;
      await client.ack(room.code, room.b, [pending[0].id]);
      expect((await client.send(room.code, room.b, "fits again")).status).toBe(200);
    });

    it(`holds at most ${MAX_PENDING_BYTES} unacked bytes room-wide`, async () => {
      const { client, room } = await pairedRoomOn(target);
      const half = "x".repeat(MAX_PENDING_BYTES / 2);
      const first = (await client.send(room.code, room.a, half)).body.id;
      expect((await client.send(room.code, room.b, half)).status).toBe(200); // exactly full
      const over = await client.send(room.code, room.a, "x");
      expect(over.status).toBe(429);
      expect(over.body.error).toBe("mailbox_full");
      await client.ack(room.code, room.b, [first]);
      expect((await client.send(room.code, room.a, "x")).status).toBe(200);
    });
  });
});
