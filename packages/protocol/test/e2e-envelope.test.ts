// The shape of an e2e envelope, as the relay checks it (it has no key, so shape is all it can check).
import { randomBytes } from "node:crypto";
import { E2E_MAX_PLAINTEXT_BYTES, MAX_TEXT_BYTES, e2eEnvelopeLength, isE2eEnvelope } from "../src/index";

const b64 = (bytes: number) => randomBytes(bytes).toString("base64");
const envelope = (iv = b64(16), ciphertext = b64(5), tag = b64(32)) => `duet-e2e:v1:${iv}:${ciphertext}:${tag}`;

describe("isE2eEnvelope", () => {
  it("accepts the shape openssl and the SDK write, for any ciphertext length", () => {
    for (const bytes of [1, 2, 3, 4, 100]) expect(isE2eEnvelope(envelope(undefined, b64(bytes)))).toBe(true);
  });

  it.each([
    ["another version", envelope().replace("v1", "v2")],
    ["no tag", envelope().split(":").slice(0, 4).join(":")],
    ["an extra field", `${envelope()}:${b64(3)}`],
    ["an empty ciphertext", envelope(undefined, "")],
    ["a short iv", envelope(b64(12))],
    ["a short tag", envelope(undefined, undefined, b64(16))],
    ["base64url characters", envelope(undefined, "-_-_")],
    ["a line break", envelope(undefined, `${b64(3)}\n`)],
    ["padding in the middle", envelope(undefined, "QQ==QQ==")],
    ["non-canonical padding bits", envelope(undefined, "QR==")],
    ["missing padding", envelope(undefined, "QQ")],
    ["plain text", "hello"],
  ])("refuses %s", (_what, text) => {
    expect(isE2eEnvelope(text)).toBe(false);
  });

  it("knows the largest plaintext whose envelope fits the relay's limit", () => {
    expect(e2eEnvelopeLength(E2E_MAX_PLAINTEXT_BYTES)).toBeLessThanOrEqual(MAX_TEXT_BYTES);
    expect(e2eEnvelopeLength(E2E_MAX_PLAINTEXT_BYTES + 1)).toBeGreaterThan(MAX_TEXT_BYTES);
  });
});
