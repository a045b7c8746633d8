// Room codes: three groups of four lowercase Crockford base32 characters, 60 random bits.
// Normalisation is shared by server and client so that what a person pastes is what
// the server looks up.

export const CODE_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
export const CODE_GROUPS = 3;
export const CODE_GROUP_LENGTH = 4;
const CODE_LENGTH = CODE_GROUPS * CODE_GROUP_LENGTH;

const CANONICAL = /^[0-9a-hjkmnp-tv-z]{4}-[0-9a-hjkmnp-tv-z]{4}-[0-9a-hjkmnp-tv-z]{4}$/;

// Crockford decoding is forgiving about letters people confuse.
const LOOKALIKES: Record<string, string> = { o: "0", i: "1", l: "1" };

/**
 * Canonical form of a room code ("k7dq-3mxa-9z2f"), or undefined when the input cannot be
 * one. Case, surrounding spaces, missing or extra dashes and Crockford look-alikes (o, i, l)
 * are tolerated.
 */
export function normalizeRoomCode(input: string): string | undefined {
  // Almost every call already has the canonical form (it came from open or join): one test.
  if (CANONICAL.test(input)) return input;
  const compact = input
    .trim()
    .toLowerCase()
    .replace(/[-\s]+/g, "")
    .replace(/[oil]/g, (c) => LOOKALIKES[c]!);
  if (compact.length !== CODE_LENGTH) return undefined;
  for (const char of compact) if (!CODE_ALPHABET.includes(char)) return undefined;
  const groups: string[] = [];
  for (let i = 0; i < CODE_LENGTH; i += CODE_GROUP_LENGTH) groups.push(compact.slice(i, i + CODE_GROUP_LENGTH));
  return groups.join("-");
}

/** A room code made from 60 random bits given as 8 bytes (the top 4 bits are unused). */
export function roomCodeFromBytes(bytes: Uint8Array): string {
  if (bytes.length < 8) throw new RangeError("roomCodeFromBytes needs 8 bytes");
  let bits = 0n;
  for (let i = 0; i < 8; i++) bits = (bits << 8n) | BigInt(bytes[i]!);
  let compact = "";
  for (let i = 0; i < CODE_LENGTH; i++) {
    compact += CODE_ALPHABET[Number(bits & 31n)];
    bits >>= 5n;
  }
  return normalizeRoomCode(compact)!;
}
