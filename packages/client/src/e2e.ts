// End-to-end encryption of a room's messages (docs/encryption.md). The room key is 32 random
// bytes made here, on the opener's machine, and travels only in the fragment of the join
// address (#k=...), which HTTP clients never send. Each direction has its own keys, derived
// with HKDF-SHA256 from the room key, the room code and the direction; each message is
// AES-256-CTR then HMAC-SHA256 over the envelope (encrypt-then-MAC), so the openssl command
// line can reproduce every step. node:crypto only.
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import { E2E_ENVELOPE_PREFIX, e2eMaxTextBytes, isE2eEnvelope, type Seat } from "@duet/protocol";

export type E2eDirection = "a2b" | "b2a";

/** Keys of one direction: AES-256-CTR key and HMAC-SHA256 key. */
export interface E2eDirectionKeys {
  enc: Buffer;
  mac: Buffer;
}

/** A fresh room key: 32 random bytes as base64url without padding (43 characters). */
export function newRoomKey(): string {
  return randomBytes(32).toString("base64url");
}

/** The 32 bytes of a room key written as base64url (43 characters), or undefined. */
export function parseRoomKey(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined;
  const key = Buffer.from(text, "base64url");
  return key.length === 32 ? key : undefined;
}

/** The room key in the fragment of a join address (`...#k=<key>`) found in `input`, if any. */
export function roomKeyInText(input: string): string | undefined {
  const match = /#(?:[^\s#]*&)?k=([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])/.exec(input);
  return match?.[1];
}

/** The join address with the room key in its fragment: what the peer needs, and all it needs. */
export function joinUrlWithKey(joinUrl: string, key: string): string {
  return `${joinUrl.replace(/#.*$/, "")}#k=${key}`;
}

/** HKDF-SHA256(room key, no salt, info "duet-e2e/v1/<code>/<direction>") -> 64 bytes: enc key, then MAC key. */
export function deriveDirectionKeys(roomKey: Buffer, code: string, direction: E2eDirection): E2eDirectionKeys {
  const okm = Buffer.from(hkdfSync("sha256", roomKey, Buffer.alloc(0), `duet-e2e/v1/${code}/${direction}`, 64));
  return { enc: okm.subarray(0, 32), mac: okm.subarray(32, 64) };
}

/** The direction a seat sends in. */
export function directionOf(sender: Seat): E2eDirection {
  return sender === "a" ? "a2b" : "b2a";
}

/**
 * Seals `<seq>\n<text>` into `duet-e2e:v1:<iv>:<ciphertext>:<tag>` (standard base64 with
 * padding). tag = HMAC-SHA256(mac key, every character before the last colon).
 */
export function sealEnvelope(keys: E2eDirectionKeys, seq: number, text: string, iv: Buffer = randomBytes(16)): string {
  if (iv.length !== 16) throw new Error("the iv must be 16 bytes");
  const cipher = createCipheriv("aes-256-ctr", keys.enc, iv);
  const ciphertext = Buffer.concat([cipher.update(`${seq}\n${text}`, "utf8"), cipher.final()]);
  const body = `${E2E_ENVELOPE_PREFIX}${iv.toString("base64")}:${ciphertext.toString("base64")}`;
  return `${body}:${createHmac("sha256", keys.mac).update(body, "latin1").digest("base64")}`;
}

export type OpenResult =
  | { ok: true; seq: number; text: string }
  | { ok: false; reason: "malformed" | "unauthenticated" };

/** Verifies the tag (constant time) and decrypts. Never returns text that did not authenticate. */
export function openEnvelope(keys: E2eDirectionKeys, envelope: string): OpenResult {
  if (!isE2eEnvelope(envelope)) return { ok: false, reason: "malformed" };
  const cut = envelope.lastIndexOf(":");
  const body = envelope.slice(0, cut);
  const tag = Buffer.from(envelope.slice(cut + 1), "base64");
  const expected = createHmac("sha256", keys.mac).update(body, "latin1").digest();
  if (!timingSafeEqual(tag, expected)) return { ok: false, reason: "unauthenticated" };
  const [, , ivText, ciphertextText] = body.split(":");
  const decipher = createDecipheriv("aes-256-ctr", keys.enc, Buffer.from(ivText!, "base64"));
  const plaintext = Buffer.concat([decipher.update(Buffer.from(ciphertextText!, "base64")), decipher.final()]);
  let decoded: string;
  try {
    decoded = new TextDecoder("utf-8", { fatal: true }).decode(plaintext);
  } catch {
    return { ok: false, reason: "malformed" };
  }
  const match = /^([1-9][0-9]{0,15})\n/.exec(decoded);
  if (!match) return { ok: false, reason: "malformed" };
  return { ok: true, seq: Number(match[1]), text: decoded.slice(match[0].length) };
}

/** Why a received message was refused. It is never shown as text. */
export type E2eRejectReason = "malformed" | "unauthenticated" | "reflected" | "replayed";

export const E2E_REJECT_EXPLANATIONS: Record<E2eRejectReason, string> = {
  malformed: "is not a duet-e2e:v1 envelope, or its authenticated content is not valid",
  unauthenticated:
    "failed authentication: it was altered after it was sealed, or your room key is wrong (check the #k= part of the join address you were given)",
  reflected: "is one of your own messages sent back to you (reflected), not a message from the peer",
  replayed: "repeats or precedes a message already read from the peer (replayed or reordered)",
};

/** What a seat remembers about its encrypted room. Kept in the state file, mode 0600. */
export interface E2eState {
  /** The room key, base64url. A secret like the seat token. */
  key: string;
  /** Sequence number of the last message this seat sealed (0: none yet). */
  sentSeq: number;
  /** Highest sequence number accepted from the peer (0: none yet). */
  recvSeq: number;
  /** Message id -> sequence number of every message accepted from the peer, so a repeated delivery is recognised. */
  seen: Record<string, number>;
}

export type ReceivedMessage =
  | { ok: true; id: string; seq: number; text: string; repeat: boolean; missing?: { from: number; to: number } }
  | { ok: false; id: string; reason: E2eRejectReason; explanation: string };

/**
 * One seat's view of an encrypted room: seals what it sends with its direction's keys and
 * opens what it receives with the peer's, tracking sequence numbers so that replay,
 * reordering, reflection and gaps show. `state` changes as it works; persist it after.
 */
export class E2eSession {
  private readonly mine: E2eDirectionKeys;
  private readonly peers: E2eDirectionKeys;

  constructor(
    readonly code: string,
    readonly seat: Seat,
    readonly state: E2eState,
  ) {
    const key = parseRoomKey(state.key);
    if (!key) throw new Error("the room key must be 32 bytes written as 43 base64url characters");
    this.mine = deriveDirectionKeys(key, code, directionOf(seat));
    this.peers = deriveDirectionKeys(key, code, directionOf(seat === "a" ? "b" : "a"));
  }

  /** A fresh session for a new seat. */
  static start(code: string, seat: Seat, key: string): E2eSession {
    return new E2eSession(code, seat, { key, sentSeq: 0, recvSeq: 0, seen: {} });
  }

  /** Largest text (UTF-8 bytes) the next seal can carry within the relay's size limit. */
  maxTextBytes(): number {
    return e2eMaxTextBytes(this.state.sentSeq + 1);
  }

  /** Seals a text with the next sequence number. */
  seal(text: string): string {
    this.state.sentSeq += 1;
    return sealEnvelope(this.mine, this.state.sentSeq, text);
  }

  /**
   * Seals another field that carries text (the protocol's MESSAGE_TEXT_FIELDS) of the message
   * whose text was sealed last, with that message's sequence number: the peer opens every such
   * field of a message and refuses one sealed with another number (moved from another message).
   */
  sealField(text: string): string {
    if (this.state.sentSeq === 0) throw new Error("seal the message's text first");
    return sealEnvelope(this.mine, this.state.sentSeq, text);
  }

  /** Opens a message from the peer. Repeated deliveries of one id are not errors. */
  open(id: string, envelope: string): ReceivedMessage {
    const refuse = (reason: E2eRejectReason): ReceivedMessage => ({
      ok: false,
      id,
      reason,
      explanation: E2E_REJECT_EXPLANATIONS[reason],
    });
    const opened = openEnvelope(this.peers, envelope);
    if (!opened.ok) {
      if (opened.reason === "unauthenticated" && openEnvelope(this.mine, envelope).ok) return refuse("reflected");
      return refuse(opened.reason);
    }
    const seenSeq = Object.hasOwn(this.state.seen, id) ? this.state.seen[id] : undefined;
    if (seenSeq !== undefined) {
      return seenSeq === opened.seq
        ? { ok: true, id, seq: opened.seq, text: opened.text, repeat: true }
        : refuse("replayed");
    }
    if (opened.seq <= this.state.recvSeq) return refuse("replayed");
    const expected = this.state.recvSeq + 1;
    this.state.recvSeq = opened.seq;
    this.state.seen[id] = opened.seq;
    const message: ReceivedMessage = { ok: true, id, seq: opened.seq, text: opened.text, repeat: false };
    if (opened.seq > expected) message.missing = { from: expected, to: opened.seq - 1 };
    return message;
  }
}
