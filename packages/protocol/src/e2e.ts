// End-to-end encrypted rooms: what the relay and the clients agree on about the envelope.
// The relay only checks the shape (it never has the key); the client seals and opens it.
// The construction is described in docs/encryption.md.
import { MAX_TEXT_BYTES } from "./limits.js";

/** First field of every envelope: the construction and its version. */
export const E2E_ENVELOPE_PREFIX = "duet-e2e:v1:";

/**
 * True for canonical standard base64 with padding, as `openssl base64 -A` writes it. A decode
 * and re-encode is exact and about ten times faster than a regular expression on a 2 MiB text.
 */
function isCanonicalBase64(text: string): boolean {
  return text.length > 0 && text.length % 4 === 0 && Buffer.from(text, "base64").toString("base64") === text;
}

/**
 * True when `text` has the shape of an envelope: `duet-e2e:v1:<iv>:<ciphertext>:<tag>`, each
 * canonical standard base64 (iv 16 bytes, tag 32 bytes, ciphertext at least one byte).
 */
export function isE2eEnvelope(text: string): boolean {
  if (!text.startsWith(E2E_ENVELOPE_PREFIX)) return false;
  const parts = text.slice(E2E_ENVELOPE_PREFIX.length).split(":");
  if (parts.length !== 3) return false;
  const [iv, ciphertext, tag] = parts as [string, string, string];
  return (
    iv.length === 24 &&
    tag.length === 44 &&
    isCanonicalBase64(iv) &&
    isCanonicalBase64(tag) &&
    isCanonicalBase64(ciphertext)
  );
}

/** Characters of an envelope that are not ciphertext: prefix, iv (24), two colons, tag (44). */
export const E2E_ENVELOPE_OVERHEAD = E2E_ENVELOPE_PREFIX.length + 24 + 1 + 1 + 44;

/** Largest sealed plaintext (sequence line included) whose envelope fits in MAX_TEXT_BYTES. */
export const E2E_MAX_PLAINTEXT_BYTES = 3 * Math.floor((MAX_TEXT_BYTES - E2E_ENVELOPE_OVERHEAD) / 4);

/** Length of the envelope that seals `plaintextBytes` bytes (sequence line included). */
export function e2eEnvelopeLength(plaintextBytes: number): number {
  return E2E_ENVELOPE_OVERHEAD + 4 * Math.ceil(plaintextBytes / 3);
}

/** Characters of the longest sequence line a sealed plaintext starts with: up to 16 digits and a newline. */
const E2E_MAX_SEQUENCE_LINE = 17;

/**
 * The limit to declare, in every room, for a field that carries peer text (marked carriesText)
 * of at most `maxBytes` UTF-8 bytes: the length of its envelope, the form it has in an
 * encrypted room. So a short field is marked like a long one, never left to travel in clear
 * because an envelope would not fit it (CONTRIBUTING.md, "A new field on every delivered message").
 */
export function e2eFieldLimit(maxBytes: number): number {
  return e2eEnvelopeLength(maxBytes + E2E_MAX_SEQUENCE_LINE);
}

/** Largest text (UTF-8 bytes) that fits in one envelope when sent with sequence number `seq`. */
export function e2eMaxTextBytes(seq: number): number {
  return E2E_MAX_PLAINTEXT_BYTES - (String(seq).length + 1);
}

/**
 * The openssl recipe (docs/encryption.md and GET /v1/api show it; the client's tests run it):
 * shell functions duet_seal and duet_open that reproduce duet-e2e v1 with OpenSSL 3 alone.
 */
export const E2E_OPENSSL_RECIPE = `${[
  "# duet-e2e:v1 with the openssl command line (OpenSSL 3). Set CODE (the room code) and",
  "# K (the 43 characters after #k= in the join address), then use duet_seal / duet_open.",
  "key_hex=$(printf '%s=' \"$K\" | tr '_-' '/+' | openssl base64 -d -A | od -An -vtx1 | tr -d ' \\n')",
  "duet_keys() {  # $1 = a2b or b2a -> sets enc and mac (hex)",
  '  okm=$(openssl kdf -keylen 64 -kdfopt digest:SHA256 -kdfopt hexkey:"$key_hex" \\',
  "        -kdfopt info:\"duet-e2e/v1/$CODE/$1\" HKDF | tr -d ':\\n')",
  '  enc=$(printf %s "$okm" | cut -c1-64); mac=$(printf %s "$okm" | cut -c65-128)',
  "}",
  "duet_seal() {  # $1 = your direction (a2b if you are seat a), $2 = seq (1, 2, ...), $3 = text",
  '  duet_keys "$1"',
  "  iv_b64=$(openssl rand -base64 16)  # a fresh random iv for every message",
  "  iv=$(printf %s \"$iv_b64\" | openssl base64 -d -A | od -An -vtx1 | tr -d ' \\n')",
  '  ct=$(printf \'%s\\n%s\' "$2" "$3" | openssl enc -aes-256-ctr -K "$enc" -iv "$iv" | openssl base64 -A)',
  '  body="duet-e2e:v1:$iv_b64:$ct"',
  '  tag=$(printf %s "$body" | openssl dgst -sha256 -mac HMAC -macopt hexkey:"$mac" -binary | openssl base64 -A)',
  '  printf \'%s:%s\\n\' "$body" "$tag"',
  "}",
  'duet_open() {  # $1 = the sender\'s direction (b2a if you are seat a), $2 = envelope; prints "<seq>\\n<text>"',
  '  duet_keys "$1"',
  "  body=${2%:*}",
  '  tag=$(printf %s "$body" | openssl dgst -sha256 -mac HMAC -macopt hexkey:"$mac" -binary | openssl base64 -A)',
  '  if [ "$tag" != "${2##*:}" ]; then echo "refused: altered, wrong key or wrong direction" >&2; return 1; fi',
  "  iv=$(printf %s \"$body\" | cut -d: -f3 | openssl base64 -d -A | od -An -vtx1 | tr -d ' \\n')",
  '  printf %s "$body" | cut -d: -f4 | openssl base64 -d -A | openssl enc -d -aes-256-ctr -K "$enc" -iv "$iv"',
  "}",
].join("\n")}\n`;
