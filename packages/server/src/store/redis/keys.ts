// The one place that names Redis keys and channels.
//
// A room's keys share the hash tag made of its code's first two characters, so in a Redis
// Cluster they live in one slot (one Lua script can touch them all) while rooms spread over
// 1,024 tags. The public tally is split the same way: each tag has its own counters hash,
// in the same slot as its rooms, so a send updates the tally inside its own script and no
// single key takes every write.
import { CODE_ALPHABET } from "@duet/protocol";

export type RoomKeys = [
  room: string,
  inboxA: string,
  inboxB: string,
  bodies: string,
  idempotency: string,
  live: string,
  ending: string,
];

export class RedisKeys {
  constructor(readonly prefix: string) {}

  private tag(code: string): string {
    return `{${code.slice(0, 2)}}`;
  }

  /**
   * The room's seven keys, in the order every script expects them (KEYS[1..7]): its own five,
   * the live-rooms set of its tag, and its ending record (see ending()).
   */
  room(code: string): RoomKeys {
    const base = `${this.prefix}${this.tag(code)}:${code}`;
    return [
      `${base}:room`,
      `${base}:inbox:a`,
      `${base}:inbox:b`,
      `${base}:bodies`,
      `${base}:idem`,
      this.liveSet(this.tag(code)),
      this.ending(code),
    ];
  }

  /**
   * The room's ending record: its seats' token hashes (never tokens), its hard cap and how
   * long to keep it; once closed, who closed it, when, and what was left unread. It lives
   * as long as the room plus the keep time, so that after the room's keys are gone it can
   * still tell one of its seats how the room ended.
   */
  ending(code: string): string {
    return `${this.prefix}${this.tag(code)}:${code}:ended`;
  }

  /** Sorted set of the tag's rooms, scored by expiry time: "rooms open now" counts the future. */
  private liveSet(tag: string): string {
    return `${this.prefix}${tag}:live`;
  }

  /** A short-lived note (the MCP self-test's probes); `key` is already a digest. */
  note(key: string): string {
    return `${this.prefix}note:${key}`;
  }

  /** Tally counters for the rooms that share this code's tag. */
  tallyFor(code: string): string {
    return `${this.prefix}${this.tag(code)}:tally`;
  }

  /** Every tag's tally hash and live-rooms set. */
  allTallies(): { tally: string; live: string }[] {
    const keys: { tally: string; live: string }[] = [];
    for (const first of CODE_ALPHABET) {
      for (const second of CODE_ALPHABET) {
        const tag = `{${first}${second}}`;
        keys.push({ tally: `${this.prefix}${tag}:tally`, live: this.liveSet(tag) });
      }
    }
    return keys;
  }

  /** Sharded pub/sub channel that wakes the room's waiting recvs (same slot as its keys). */
  wakeChannel(code: string): string {
    return `${this.prefix}${this.tag(code)}:${code}:wake`;
  }

  /**
   * The rooms a client address opened and that may still be live: a sorted set, code -> the
   * room's hard deadline (ms). One key per address, in no room's slot: claim-1.lua is its
   * only writer, and never touches a room's keys.
   */
  clientRooms(address: string): string {
    return `${this.prefix}client:${address}`;
  }

  /**
   * The storage format of everything under the prefix (format-version.ts): a string holding
   * its number, written once by the first node on an empty prefix, with no expiry.
   */
  format(): string {
    return `${this.prefix}format`;
  }

  /** Prefix of the rate limiter's keys. */
  rateLimit(name: string): string {
    return `${this.prefix}rl:${name}:`;
  }

  /**
   * One window of the leased request limit (lease-tokens-1.lua): a hash of client key -> calls
   * taken from that address's budget by every node (tokens leased plus calls charged). The
   * window's start (ms since the epoch, a multiple of the window) names it, so a new window
   * is a new key and the old one expires.
   */
  rateLimitWindow(name: string, windowStart: number): string {
    return `${this.prefix}rl:${name}:w:${windowStart}`;
  }
}
