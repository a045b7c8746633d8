// End-to-end encrypted rooms as the relay sees them (docs/encryption.md): a flag given at
// open, told by join, status and the join page, and a format check on send. The relay never
// has the key, so these tests use random envelopes of the right shape.
import { randomBytes } from "node:crypto";
import { E2E_OPENSSL_RECIPE, MAX_TEXT_BYTES } from "@duet/protocol";
import { forEachTarget, pairedRoomOn } from "../support/targets";

/** An envelope-shaped text whose ciphertext is `bytes` random bytes. */
const envelope = (bytes = 24) =>
  `duet-e2e:v1:${randomBytes(16).toString("base64")}:${randomBytes(bytes).toString("base64")}:${randomBytes(32).toString("base64")}`;

forEachTarget((target) => {
  async function encryptedRoom() {
    const { client } = target();
    const opened = await client.open({ body: { e2e: true } });
    expect(opened.status).toBe(200);
    const joined = await client.join(opened.body.code);
    expect(joined.status).toBe(200);
    return {
      code: opened.body.code,
      a: opened.body.token,
      b: joined.body.token,
      opened: opened.body,
      joined: joined.body,
    };
  }

  describe("end-to-end encrypted rooms", () => {
    it("open records the flag; join and status say the room is encrypted and what the second agent needs", async () => {
      const { client } = target();
      const room = await encryptedRoom();
      expect(room.opened.e2e).toBe(true);
      // The relay has no key, so its own join address and share block carry none.
      expect(room.opened.join_url).not.toContain("#");
      expect(room.opened.share).not.toContain("#k=");
      expect(room.joined).toMatchObject({
        seat: "b",
        e2e: true,
        e2e_note: expect.stringMatching(/end-to-end encrypted.*k= value after #/),
      });
      for (const token of [room.a, room.b]) {
        expect((await client.status(room.code, token)).body).toMatchObject({
          e2e: true,
          e2e_note: expect.stringContaining("end-to-end encrypted"),
        });
      }
    });

    it("plain rooms answer as before, with no e2e field", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect(room.opened).not.toHaveProperty("e2e");
      expect((await client.status(room.code, room.b)).body).not.toHaveProperty("e2e");
      const explicit = await client.open({ body: { e2e: false } });
      expect(explicit.status).toBe(200);
      expect(explicit.body).not.toHaveProperty("e2e");
    });

    it("open refuses an e2e flag that is not a boolean", async () => {
      const refused = await target().client.open({ body: { e2e: "yes" } });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toBe("bad_request");
    });

    it("refuses a text that is not an envelope with 400 e2e_required, stores nothing, and carries envelopes unchanged", async () => {
      const { client } = target();
      const room = await encryptedRoom();
      const good = envelope();
      const notEnvelopes = [
        "hello in plain text",
        good.replace("duet-e2e:v1:", "duet-e2e:v2:"),
        good.slice(0, good.lastIndexOf(":")),
        good.replace(/:[^:]+:/, ":not base64!:"),
        `${good}\n`,
      ];
      for (const text of notEnvelopes) {
        const refused = await client.send(room.code, room.a, text, "same-key");
        expect(refused.status).toBe(400);
        expect(refused.body).toEqual({
          error: "e2e_required",
          message: expect.stringMatching(/end-to-end encrypted.*envelope/),
        });
      }
      expect((await client.recv(room.code, room.b)).body.messages).toEqual([]);
      // A refused send leaves no record: its key works for the envelope.
      const sent = await client.send(room.code, room.a, good, "same-key");
      expect(sent.status).toBe(200);
      expect((await client.recv(room.code, room.b)).body.messages).toEqual([
        { id: sent.body.id, from: "a", text: good },
      ]);
      const back = envelope(3);
      expect((await client.send(room.code, room.b, back)).status).toBe(200);
      expect((await client.recv(room.code, room.a)).body.messages).toEqual([
        { id: expect.any(String), from: "b", text: back },
      ]);
    });

    it("a plain room accepts envelope-shaped and plain text alike", async () => {
      const { client, room } = await pairedRoomOn(target);
      expect((await client.send(room.code, room.a, envelope())).status).toBe(200);
      expect((await client.send(room.code, room.a, "plain")).status).toBe(200);
    });

    it("the 2 MiB limit applies to the envelope", async () => {
      const { client } = target();
      const room = await encryptedRoom();
      // 82 characters of frame plus 4 per 3 ciphertext bytes: the largest envelope is 2,097,150 characters.
      const largest = envelope(3 * Math.floor((MAX_TEXT_BYTES - 82) / 4));
      expect(largest.length).toBe(2_097_150);
      const tooLarge = envelope(3 * Math.floor((MAX_TEXT_BYTES - 82) / 4) + 1);
      expect(tooLarge.length).toBeGreaterThan(MAX_TEXT_BYTES);
      expect((await client.send(room.code, room.a, tooLarge)).body.error).toBe("too_large");
      expect((await client.send(room.code, room.a, largest)).status).toBe(200);
    });

    it("the recipe at /v1/api explains encrypted rooms and shows the openssl recipe", async () => {
      const recipe = await target().client.call("GET", "/v1/api");
      expect(recipe.text).toContain("## End-to-end encrypted rooms");
      expect(recipe.text).toContain(E2E_OPENSSL_RECIPE);
      expect(recipe.text).toMatch(/leaked join address or share block of an encrypted room\s+is a leaked key/);
    });

    it("the join page says where the key of an encrypted room is, the same for every code (it tells no room from another)", async () => {
      const { client } = target();
      const room = await encryptedRoom();
      const markdown = await client.call("GET", `/join/${room.code}`);
      expect(markdown.status).toBe(200);
      expect(markdown.text).toMatch(/`#k=…` after the code, this room is end-to-end encrypted/);
      expect(markdown.text).toMatch(/`k=` value after `#`/);
      const html = await client.call("GET", `/join/${room.code}`, { headers: { accept: "text/html" } });
      expect(html.text).toMatch(/<strong>If the join address you were given has <code>#k=…<\/code> after the code/);
      const plain = await client.pairedRoom();
      const plainPage = (await client.call("GET", `/join/${plain.code}`)).text;
      // Over several nodes each answers with its own base URL: the rest must be the same.
      const bare = (page: string, code: string) =>
        page
          .split(code)
          .join("")
          .replace(/http:\/\/[^/\s'"]+/g, "BASE");
      expect(bare(plainPage, plain.code)).toBe(bare(markdown.text, room.code));
      expect((await client.call("GET", `/join/aaaa-bbbb-cccc`)).status).toBe(200);
    });
  });
});
