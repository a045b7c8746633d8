// duet-e2e v1 (docs/encryption.md): known-answer vectors, checked against the SDK and against
// the openssl recipe of the docs run as it is; and what a receiving seat makes of tampered,
// reflected, replayed, reordered and repeated messages.
import { E2E_OPENSSL_RECIPE, MAX_TEXT_BYTES, e2eMaxTextBytes, isE2eEnvelope } from "@duet/protocol";
import { FIXED_IV_PRELUDE, opensslRecipe, runRecipe } from "../support/openssl-recipe";
import {
  E2eSession,
  deriveDirectionKeys,
  joinUrlWithKey,
  newRoomKey,
  openEnvelope,
  parseRoomKey,
  roomKeyInText,
  sealEnvelope,
} from "../../src/e2e";
import { openAll } from "../../src/encrypted-room";

const KEY = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
const K = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
const CODE = "k7dq-3mxa-9z2f";
const IV = Buffer.from(Array.from({ length: 16 }, (_, i) => 0xf0 + i));
const VECTORS = [
  {
    direction: "a2b" as const,
    seq: 1,
    text: "hello, duet",
    envelope: "duet-e2e:v1:8PHy8/T19vf4+fr7/P3+/w==:CQeUWUrec1RF9UseMQ==:E0uFk/BBDfWFM1knt2CPuBq/FOgi34tpUaqZyq9myaQ=",
  },
  {
    direction: "b2a" as const,
    seq: 2,
    text: "ça marche ✓\nline two",
    envelope:
      "duet-e2e:v1:8PHy8/T19vf4+fr7/P3+/w==:zPKKcMECt5aWktvXC7Xh/E3SzuYFL1WZuQ==:/BtDPE0fQh7BL3zGaB7h+/DxN9w8ehwjUmnRGW3GyvU=",
  },
];

describe("duet-e2e v1 known answers", () => {
  it("reads the room key from the fragment", () => {
    expect(parseRoomKey(K)?.equals(KEY)).toBe(true);
    expect(
      roomKeyInText(`duet room ${CODE}\nOtherwise read the join address: http://relay.test/join/${CODE}#k=${K}\n`),
    ).toBe(K);
    expect(roomKeyInText(`http://relay.test/join/${CODE}`)).toBeUndefined();
    expect(joinUrlWithKey(`http://relay.test/join/${CODE}`, K)).toBe(`http://relay.test/join/${CODE}#k=${K}`);
    expect(parseRoomKey(newRoomKey())?.length).toBe(32);
    expect(parseRoomKey(K.slice(1))).toBeUndefined();
  });

  it("derives the documented keys", () => {
    const a2b = deriveDirectionKeys(KEY, CODE, "a2b");
    const b2a = deriveDirectionKeys(KEY, CODE, "b2a");
    expect(a2b.enc.toString("hex")).toBe("a3cd8d4410d0582463ba7986207fe36fb6c4a42501de048eee431b5d305de6c4");
    expect(a2b.mac.toString("hex")).toBe("8d33ac73be1845a511e263afcfa117435f94dcd5b7627c489a7c840d1ff8a02e");
    expect(b2a.enc.toString("hex")).toBe("d3814674c662ea8cf672cdb39aa100f08116f8259915cdc91a467df6cf44ebf5");
    expect(b2a.mac.toString("hex")).toBe("389544513ae378d100325f42c4f7120463818a6a3af65be29f8c71ed54dbe062");
  });

  it.each(VECTORS)("seals and opens the $direction vector with the SDK", ({ direction, seq, text, envelope }) => {
    const keys = deriveDirectionKeys(KEY, CODE, direction);
    expect(sealEnvelope(keys, seq, text, IV)).toBe(envelope);
    expect(isE2eEnvelope(envelope)).toBe(true);
    expect(openEnvelope(keys, envelope)).toEqual({ ok: true, seq, text });
  });

  it.each(VECTORS)(
    "seals and opens the $direction vector with the openssl recipe of the docs",
    ({ direction, seq, text, envelope }) => {
      const env = { CODE, K, TEXT: text, ENVELOPE: envelope, FIXED_IV: IV.toString("base64") };
      expect(runRecipe(`duet_seal ${direction} ${seq} "$TEXT"`, env, FIXED_IV_PRELUDE)).toBe(`${envelope}\n`);
      expect(runRecipe(`duet_open ${direction} "$ENVELOPE"`, env)).toBe(`${seq}\n${text}`);
    },
  );

  it("the docs show the recipe the protocol package serves in GET /v1/api", () => {
    expect(opensslRecipe()).toBe(E2E_OPENSSL_RECIPE);
  });

  it("the openssl recipe draws a fresh iv for every message", () => {
    const env = { CODE, K, TEXT: "same text" };
    expect(runRecipe(`duet_seal a2b 1 "$TEXT"`, env)).not.toBe(runRecipe(`duet_seal a2b 1 "$TEXT"`, env));
  });

  it("the openssl recipe refuses an altered envelope and the other direction", () => {
    const { envelope } = VECTORS[0]!;
    const altered = envelope.replace(":CQe", ":CQf");
    const run = (direction: string, text: string) => () =>
      runRecipe(`duet_open ${direction} "$ENVELOPE" 2>/dev/null`, { CODE, K, ENVELOPE: text });
    expect(run("a2b", altered)).toThrow();
    expect(run("b2a", envelope)).toThrow();
  });
});

describe("the size limit applies to the envelope", () => {
  it("the largest text the SDK says fits makes an envelope within the relay's limit, one byte more does not", () => {
    const keys = deriveDirectionKeys(KEY, CODE, "a2b");
    const max = e2eMaxTextBytes(1);
    expect(max).toBe(1_572_799);
    expect(sealEnvelope(keys, 1, "x".repeat(max)).length).toBeLessThanOrEqual(MAX_TEXT_BYTES);
    expect(sealEnvelope(keys, 1, "x".repeat(max + 1)).length).toBeGreaterThan(MAX_TEXT_BYTES);
    expect(e2eMaxTextBytes(10)).toBe(max - 1);
  });
});

describe("E2eSession: what the receiving seat makes of each message", () => {
  const pair = () => ({ a: E2eSession.start(CODE, "a", K), b: E2eSession.start(CODE, "b", K) });

  it("reads the peer's messages in order, and a repeated delivery of one id as the same message", () => {
    const { a, b } = pair();
    const first = a.seal("one");
    const second = a.seal("two");
    expect(b.open("1", first)).toMatchObject({ ok: true, seq: 1, text: "one", repeat: false });
    expect(b.open("2", second)).toMatchObject({ ok: true, seq: 2, text: "two", repeat: false });
    expect(b.open("1", first)).toMatchObject({ ok: true, seq: 1, text: "one", repeat: true });
    expect(b.state.recvSeq).toBe(2);
  });

  it("refuses a message that carries no sealed field at all: nothing in it was authenticated", () => {
    const { a, b } = pair();
    const sealed = { id: "1", from: "a" as const, text: a.seal("one") };
    const bare = { id: "2", from: "a" as const } as unknown as typeof sealed;
    expect(openAll(b, [sealed, bare])).toEqual([
      { id: "1", from: "a", text: "one", seq: 1 },
      { id: "2", from: "a", reason: "malformed", explanation: expect.any(String) },
    ]);
  });

  it("refuses an altered envelope as unauthenticated", () => {
    const { a, b } = pair();
    const envelope = a.seal("pay 10");
    const parts = envelope.split(":");
    const ciphertext = Buffer.from(parts[3]!, "base64");
    ciphertext[ciphertext.length - 1]! ^= 0x01;
    parts[3] = ciphertext.toString("base64");
    expect(b.open("1", parts.join(":"))).toMatchObject({ ok: false, reason: "unauthenticated" });
    expect(b.open("1", envelope)).toMatchObject({ ok: true, text: "pay 10" });
  });

  it("refuses every message when the key is wrong", () => {
    const a = E2eSession.start(CODE, "a", K);
    const b = E2eSession.start(CODE, "b", newRoomKey());
    expect(b.open("1", a.seal("hi"))).toMatchObject({ ok: false, reason: "unauthenticated" });
  });

  it("refuses an envelope of another room sealed with the same key", () => {
    const other = E2eSession.start("aaaa-bbbb-cccc", "a", K);
    expect(E2eSession.start(CODE, "b", K).open("1", other.seal("hi"))).toMatchObject({
      ok: false,
      reason: "unauthenticated",
    });
  });

  it("refuses its own message sent back to it as reflected", () => {
    const { a } = pair();
    expect(a.open("1", a.seal("mine"))).toMatchObject({ ok: false, reason: "reflected" });
  });

  it("refuses an old envelope under a new id as replayed, and an older one arriving late", () => {
    const { a, b } = pair();
    const one = a.seal("one");
    const two = a.seal("two");
    const three = a.seal("three");
    expect(b.open("1", one)).toMatchObject({ ok: true });
    expect(b.open("7", one)).toMatchObject({ ok: false, reason: "replayed" });
    // Reordered: 3 before 2. 3 is read with a note that 2 is missing; 2 is then refused.
    expect(b.open("3", three)).toMatchObject({ ok: true, seq: 3, missing: { from: 2, to: 2 } });
    expect(b.open("2", two)).toMatchObject({ ok: false, reason: "replayed" });
    // A known id carrying another message is a replay too.
    expect(b.open("1", three)).toMatchObject({ ok: false, reason: "replayed" });
  });

  it("refuses text that is not an envelope", () => {
    const { b } = pair();
    expect(b.open("1", "hello")).toMatchObject({ ok: false, reason: "malformed" });
  });

  it("keeps its state as JSON that a later process can continue from", () => {
    const { a, b } = pair();
    b.open("1", a.seal("one"));
    const again = new E2eSession(CODE, "b", JSON.parse(JSON.stringify(b.state)));
    const a2 = new E2eSession(CODE, "a", JSON.parse(JSON.stringify(a.state)));
    expect(again.open("2", a2.seal("two"))).toMatchObject({ ok: true, seq: 2, text: "two" });
  });
});
