// End-to-end encrypted rooms: what the relay and the clients agree on about the envelope.
// The relay only checks the shape (it never has the key); the client seals and opens it.
// The construction is described in docs/encryption.md.
import { MAX_TEXT_BYTES } from "./limits.js";

/** First field of every envelope: the construction and its version. */
export const E2E_ENVELOPE_PREFIX = "duet-e2e:v1:";

const B64 = "[A-Za-z0-9+/]";
// Standard base64 with padding (what `openssl base64 -A` writes): iv 16 bytes, tag 32 bytes,
// ciphertext at least one byte.
const ENVELOPE = new RegExp(
  `^duet-e2e:v1:${B64}{22}==:(?:${B64}{4})*(?:${B64}{4}|${B64}{3}=|${B64}{2}==):${B64}{43}=$`,
);

/** True when `text` has the shape of an envelope: `duet-e2e:v1:<iv>:<ciphertext>:<tag>`, each standard base64. */
export function isE2eEnvelope(text: string): boolean {
  return text.startsWith(E2E_ENVELOPE_PREFIX) && ENVELOPE.test(text);
}

/** Characters of an envelope that are not ciphertext: prefix, iv (24), two colons, tag (44). */
export const E2E_ENVELOPE_OVERHEAD = E2E_ENVELOPE_PREFIX.length + 24 + 1 + 1 + 44;

/** Largest sealed plaintext (sequence line included) whose envelope fits in MAX_TEXT_BYTES. */
export const E2E_MAX_PLAINTEXT_BYTES = 3 * Math.floor((MAX_TEXT_BYTES - E2E_ENVELOPE_OVERHEAD) / 4);

/** Length of the envelope that seals `plaintextBytes` bytes (sequence line included). */
export function e2eEnvelopeLength(plaintextBytes: number): number {
  return E2E_ENVELOPE_OVERHEAD + 4 * Math.ceil(plaintextBytes / 3);
}

/** Largest text (UTF-8 bytes) that fits in one envelope when sent with sequence number `seq`. */
export function e2eMaxTextBytes(seq: number): number {
  return E2E_MAX_PLAINTEXT_BYTES - (String(seq).length + 1);
}
