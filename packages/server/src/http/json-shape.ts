// A JSON body parsed as it arrives, chunk by chunk, with its shape bounded (MAX_BODY_ITEMS,
// MAX_BODY_DEPTH, MAX_BODY_STRUCTURE_BYTES) before any of it is built: parsing costs time per
// value, so no turn of the event loop does more than one chunk's work whatever the body's
// shape. Strings are decoded as their bytes arrive (kept only to 2 MiB and a piece); the
// skeleton left for the end goes through JSON.parse. The result equals JSON.parse's
// (test/unit/json-body.test.ts). docs/security.md, "One request cannot stall a node".
import { isUtf8 } from "node:buffer";
import * as limits from "@duet/protocol";
import { type ApiError, apiError } from "../errors.js";
import { echoName } from "./validate.js";

// Read once: the package's re-exports are getters, too slow for a loop over every byte.
const { MAX_BODY_DEPTH, MAX_BODY_ITEMS, MAX_TEXT_BYTES, MAX_BODY_STRUCTURE_BYTES: MAX_SKELETON_BYTES } = limits;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const LETTER_U = 0x75;
const isWhitespace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

// The messages are made once: toLocaleString's first call costs tens of milliseconds.
const TOO_MANY_ITEMS = `The body holds more than ${MAX_BODY_ITEMS.toLocaleString("en")} fields and array items; no duet call needs that many.`;
const TOO_DEEP = `The body nests objects and arrays deeper than ${MAX_BODY_DEPTH} levels.`;
const TOO_MUCH_STRUCTURE = `The body holds more than ${MAX_SKELETON_BYTES.toLocaleString("en")} bytes outside its strings; no duet call needs that many.`;
export const NOT_JSON = "The body is not valid JSON.";
export const NOT_UTF8 = "The body is not valid UTF-8.";

export class JsonBodyParser {
  private items = 0;
  private depth = 0;
  /** The structure so far, each string as "<its index>", whitespace runs as one space. */
  private skeleton: string[] = [];
  private skeletonBytes = 0;
  private lastWasSpace = false;
  /** Every string of the body, decoded, in the order they opened. */
  private readonly strings: string[] = [];
  private inString = false;
  /** Inside a string: the previous byte was a backslash. */
  private escaped = false;
  /** Inside a string: hex digits of a \u escape still to come. */
  private hexLeft = 0;
  /** Bytes of the last chunk that could not be decoded yet (a split escape or UTF-8 sequence). */
  private carry: Buffer | undefined;
  private fed = 0;

  /** Reads the next chunk; a refusal ends the body (feed nothing more). */
  feed(next: Buffer): ApiError | undefined {
    this.fed += next.length;
    const chunk = this.carry ? Buffer.concat([this.carry, next]) : next;
    this.carry = undefined;
    const n = chunk.length;
    let i = 0;
    let runStart = 0; // start of the skeleton bytes not yet copied
    while (i < n) {
      if (this.inString) {
        const refusal = this.readString(chunk, i);
        if (typeof refusal !== "number") return refusal;
        i = refusal;
        runStart = i;
        continue;
      }
      const c = chunk[i]!;
      if (c === QUOTE || isWhitespace(c)) {
        const refusal = this.copy(chunk, runStart, i);
        if (refusal) return refusal;
        if (c === QUOTE) {
          // A string is a field's name or a value: a body of few items has few strings.
          if (this.strings.length >= 2 * MAX_BODY_ITEMS + 2) return apiError("bad_request", TOO_MANY_ITEMS);
          const placeholder = `"${this.strings.length}"`;
          const refusal = this.grow(placeholder.length);
          if (refusal) return refusal;
          this.skeleton.push(placeholder);
          this.strings.push("");
          this.inString = true;
          this.lastWasSpace = false;
        } else if (!this.lastWasSpace) {
          const refusal = this.grow(1);
          if (refusal) return refusal;
          this.skeleton.push(" ");
          this.lastWasSpace = true;
        }
        runStart = ++i;
        continue;
      }
      i++;
      if (c === COMMA) {
        if (++this.items > MAX_BODY_ITEMS) return apiError("bad_request", TOO_MANY_ITEMS);
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        if (++this.items > MAX_BODY_ITEMS) return apiError("bad_request", TOO_MANY_ITEMS);
        if (++this.depth > MAX_BODY_DEPTH) return apiError("bad_request", TOO_DEEP);
      } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        this.depth--;
      } else if (c >= 0x80) {
        return apiError("bad_request", NOT_JSON); // outside strings JSON is ASCII
      }
    }
    if (!this.inString) return this.copy(chunk, runStart, n);
    return undefined;
  }

  /** The body's value once every chunk was fed, or the refusal. An empty body is {}. */
  end(): { value: unknown } | ApiError {
    if (this.inString) return apiError("bad_request", NOT_JSON);
    // A string cut short must not end in half a surrogate pair (that would read as invalid
    // Unicode rather than as too long).
    for (let i = 0; i < this.strings.length; i++) {
      const value = this.strings[i]!;
      if (value.length > MAX_TEXT_BYTES + 1 && /[\ud800-\udbff]$/.test(value)) this.strings[i] = value.slice(0, -1);
    }
    if (this.fed === 0) return { value: {} };
    let parsed: unknown;
    try {
      parsed = JSON.parse(this.skeleton.join(""));
    } catch {
      return apiError("bad_request", NOT_JSON);
    }
    const path: (string | number)[] = [];
    try {
      return { value: this.restore(parsed, path) };
    } catch (error) {
      if (!(error instanceof DuplicateField)) throw error;
      // Named as validate.ts names fields: a few printable characters of each part.
      const where = path.length ? ` (in ${path.map((part) => echoName(String(part))).join(".")})` : "";
      return apiError(
        "bad_request",
        `The body names the field ${echoName(error.name)} twice${where}: send each field once.`,
      );
    }
  }

  /** Copies chunk[from, to) (no string, no whitespace in it) to the skeleton. */
  private copy(chunk: Buffer, from: number, to: number): ApiError | undefined {
    if (to <= from) return undefined;
    const refusal = this.grow(to - from);
    if (refusal) return refusal;
    this.skeleton.push(chunk.toString("latin1", from, to));
    this.lastWasSpace = false;
    return undefined;
  }

  private grow(bytes: number): ApiError | undefined {
    this.skeletonBytes += bytes;
    return this.skeletonBytes > MAX_SKELETON_BYTES ? apiError("bad_request", TOO_MUCH_STRUCTURE) : undefined;
  }

  /**
   * Reads string content from `i` to its closing quote or the chunk's end, decoding what it
   * read; returns where it stopped, or a refusal.
   */
  private readString(chunk: Buffer, start: number): number | ApiError {
    const n = chunk.length;
    let end = n; // where the string's content read here ends
    let next = n; // where reading goes on
    let cut = n; // content from here on waits for the next chunk
    const quote = chunk.indexOf(QUOTE, start);
    // Most strings hold no escape: then the closing quote is the next quote, found natively
    // (the backslash searched up to it only, so a chunk of many short strings stays linear).
    if (chunk.subarray(start, quote === -1 ? n : quote).indexOf(BACKSLASH) === -1) {
      if (quote !== -1) {
        end = cut = quote;
        next = quote + 1;
        this.inString = false;
      }
    } else {
      let escapeAt = -1;
      let i = start;
      for (; i < n; i++) {
        const c = chunk[i]!;
        if (this.hexLeft > 0) {
          this.hexLeft--;
        } else if (this.escaped) {
          this.escaped = false;
          if (c === LETTER_U) this.hexLeft = 4;
        } else if (c === BACKSLASH) {
          this.escaped = true;
          escapeAt = i;
        } else if (c === QUOTE) {
          break;
        }
      }
      if (i < n) {
        end = cut = i;
        next = i + 1;
        this.inString = false;
      } else if (this.escaped || this.hexLeft > 0) {
        // The chunk ends inside an escape: it is decoded with the next chunk.
        cut = escapeAt;
        this.escaped = false;
        this.hexLeft = 0;
      }
    }
    if (this.inString) {
      // Nor is a UTF-8 sequence the chunk splits decoded before its last byte arrived.
      cut = Math.min(cut, utf8Boundary(chunk, start, cut));
      end = cut;
      if (cut < n) this.carry = Buffer.from(chunk.subarray(cut));
    }
    if (end > start) {
      let text: string;
      if (end - start <= SHORT && isPlainAscii(chunk, start, end)) {
        text = chunk.toString("latin1", start, end); // a field name, a code: nothing to decode
      } else {
        const piece = chunk.subarray(start, end);
        if (!isUtf8(piece)) return apiError("bad_request", NOT_UTF8);
        try {
          // The piece ends on no escape and no split character: JSON.parse decodes it as part
          // of its string would be (escapes, and raw control characters refused).
          text = JSON.parse(`"${piece.toString("utf8")}"`) as string;
        } catch {
          return apiError("bad_request", NOT_JSON);
        }
      }
      const index = this.strings.length - 1;
      const kept = this.strings[index]!;
      // A string longer than any legal text is kept only as far as it takes to see that: more
      // UTF-16 units than MAX_TEXT_BYTES are more UTF-8 bytes too, so whatever reads it answers
      // too_large (or names it an unknown field) as it would the whole, and what runs after
      // the parse (schemas, byte counts) never walks more than about 2 MiB of one string.
      const room = MAX_TEXT_BYTES + 2 - kept.length;
      if (room > 0) this.strings[index] = kept + (text.length > room ? text.slice(0, room) : text);
    }
    return next;
  }

  /**
   * The parsed skeleton with its strings put back (keys included), as JSON.parse would build
   * it, except that a field named twice in one object (at any depth) throws DuplicateField:
   * JSON.parse would keep the last silently, and what reads the body (a schema, a proxy, a
   * log) might take another. `path` is left at the object that holds it.
   */
  private restore(value: unknown, path: (string | number)[]): unknown {
    if (typeof value === "string") return this.strings[Number(value)];
    if (typeof value !== "object" || value === null) return value;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        path.push(i);
        value[i] = this.restore(value[i], path);
        path.pop();
      }
      return value;
    }
    const out: Record<string, unknown> = {};
    // Skeleton keys are string indices: Object.keys lists them in the order they were written.
    for (const key of Object.keys(value)) {
      const name = this.strings[Number(key)]!;
      if (Object.hasOwn(out, name)) throw new DuplicateField(name);
      path.push(name);
      const item = this.restore((value as Record<string, unknown>)[key], path);
      path.pop();
      // As JSON.parse does, "__proto__" stays an own field and never sets the prototype.
      if (name === "__proto__")
        Object.defineProperty(out, name, { value: item, enumerable: true, writable: true, configurable: true });
      else out[name] = item;
    }
    return out;
  }
}

/** A field named twice in one object. */
class DuplicateField extends Error {
  constructor(readonly name: string) {
    super("duplicate field");
  }
}

/** Pieces of strings up to this long are checked byte by byte for the common case below. */
const SHORT = 64;

/** chunk[from, to) is printable ASCII without a backslash: its text is its bytes. */
function isPlainAscii(chunk: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = chunk[i]!;
    if (c < 0x20 || c >= 0x7f || c === BACKSLASH) return false;
  }
  return true;
}

/** The end of chunk[from, to) moved back to before a UTF-8 sequence it splits (to itself when none). */
function utf8Boundary(chunk: Buffer, from: number, to: number): number {
  for (let back = 1; back <= 3 && to - back >= from; back++) {
    const c = chunk[to - back]!;
    if (c < 0x80) return to; // ASCII: nothing split
    if (c >= 0xc0) {
      // A lead byte: its sequence needs 2, 3 or 4 bytes.
      const length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      return length > back ? to - back : to;
    }
  }
  return to;
}
