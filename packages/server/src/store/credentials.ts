// Minting and hashing of room codes and seat tokens, shared by both stores.
import { createHash, hash, randomBytes, timingSafeEqual } from "node:crypto";
import { roomCodeFromBytes } from "@duet/protocol";

/** A new room code: 60 random bits. */
export const mintRoomCode = (): string => roomCodeFromBytes(randomBytes(8));

/** A new seat token: 256 random bits, base64url. */
export const mintSeatToken = (): string => randomBytes(32).toString("base64url");

/** What the store keeps of a token. SHA-256 of a 256-bit secret cannot be reversed. */
// crypto.hash is the one-shot form: no Hash object per call (every room call hashes a token).
export const hashSeatToken = (token: string): string => hash("sha256", token, "base64url");

/** Constant-time comparison of two token hashes (equal lengths by construction). */
export function tokenHashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Digest of a text, to tell a retried send (same text) from a conflicting one. */
export const digestText = (text: string): string => createHash("sha256").update(text).digest("base64url");
