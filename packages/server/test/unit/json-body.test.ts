// The streaming body parser (src/http/json-shape.ts): whatever the chunking, it gives what
// JSON.parse gives for the whole body, refuses what JSON.parse refuses, and refuses a body
// past its shape limits before parsing it.
import { isUtf8 } from "node:buffer";
import fc from "fast-check";
import { MAX_BODY_DEPTH, MAX_BODY_ITEMS, MAX_BODY_STRUCTURE_BYTES, MAX_TEXT_BYTES } from "@duet/protocol";
import { ApiError } from "../../src/errors";
import { JsonBodyParser } from "../../src/http/json-shape";

/** Feeds `body` cut at `cuts` (byte offsets); the value, or the refusal's code and message. */
function parse(body: Buffer, cuts: number[] = []): { value: unknown } | { error: string; message: string } {
  const parser = new JsonBodyParser();
  const points = [...new Set(cuts.map((c) => Math.min(c, body.length)))].sort((a, b) => a - b);
  let from = 0;
  for (const to of [...points, body.length]) {
    if (to <= from && to !== body.length) continue;
    const refusal = parser.feed(body.subarray(from, to));
    if (refusal) return { error: refusal.code, message: refusal.message };
    from = to;
  }
  const result = parser.end();
  return result instanceof ApiError ? { error: result.code, message: result.message } : result;
}

/** JSON text with some characters written as \u escapes, and some whitespace between tokens. */
const jsonText = fc
  .tuple(fc.jsonValue({ maxDepth: 4 }), fc.boolean(), fc.integer({ min: 0, max: 4 }))
  .map(([value, escapeAll, indent]) => {
    let text = JSON.stringify(value, null, indent);
    if (escapeAll)
      text = text.replace(/"((?:[^"\\]|\\.)*)"/g, (_m, inner: string) => {
        const chars = [...(JSON.parse(`"${inner}"`) as string)];
        return `"${chars.map((ch) => [...ch].map((u) => `\\u${u.codePointAt(0)!.toString(16).padStart(4, "0")}`).join("")).join("")}"`;
      });
    return text;
  });

/** Fields of every object in a parsed value. */
function fieldCount(value: unknown): number {
  if (typeof value !== "object" || value === null) return 0;
  const items = Array.isArray(value) ? value : Object.values(value);
  return (Array.isArray(value) ? 0 : items.length) + items.reduce<number>((n, item) => n + fieldCount(item), 0);
}

/** Colons outside strings in JSON text: one per field written. */
function colons(text: string): number {
  let count = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === ":") count++;
  }
  return count;
}

const cutsOf = (length: number) => fc.array(fc.integer({ min: 0, max: Math.max(0, length) }), { maxLength: 12 });

describe("JsonBodyParser", () => {
  it("gives what JSON.parse gives, however the body is cut into chunks", () => {
    fc.assert(
      fc.property(
        jsonText.chain((text) => fc.tuple(fc.constant(text), cutsOf(Buffer.byteLength(text)))),
        ([text, cuts]) => {
          expect(parse(Buffer.from(text), cuts)).toEqual({ value: JSON.parse(text) });
        },
      ),
      { numRuns: 400 },
    );
  });

  it("refuses exactly what JSON.parse refuses (text of JSON's own characters)", () => {
    const unit = fc.constantFrom(...'{}[]:,"\\ \n0123456789.eE+-tfrulnsa\u00e9\u{1f600}/bu');
    fc.assert(
      fc.property(
        fc
          .string({ unit, minLength: 1, maxLength: 40 })
          .chain((text) => fc.tuple(fc.constant(text), cutsOf(Buffer.byteLength(text)))),
        ([text, cuts]) => {
          let expected: unknown;
          try {
            expected = { value: JSON.parse(text) };
          } catch {
            expected = { error: "bad_request", message: "The body is not valid JSON." };
          }
          const got = parse(Buffer.from(text), cuts);
          // A field named twice, which JSON.parse keeps once: fewer fields than colons.
          if ("value" in (expected as object) && fieldCount((expected as { value: unknown }).value) < colons(text))
            expect(got).toEqual({ error: "bad_request", message: expect.stringMatching(/ twice/) });
          else expect(got).toEqual(expected);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("refuses invalid UTF-8 inside and outside strings, wherever the chunks are cut", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 6 }).filter((bytes) => !isUtf8(bytes)),
        fc.constantFrom("inside", "outside"),
        fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 6 }),
        (bytes, where, cuts) => {
          const body =
            where === "inside"
              ? Buffer.concat([Buffer.from('{"text":"a'), Buffer.from(bytes), Buffer.from('b"}')])
              : Buffer.concat([Buffer.from('{"text":1'), Buffer.from(bytes), Buffer.from("}")]);
          expect(parse(body, cuts)).toMatchObject({ error: "bad_request" });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("refuses a field named twice in one object, at any depth, naming it and where", () => {
    const twice = (text: string) => parse(Buffer.from(text));
    expect(twice('{"code":"x","code":"y"}')).toEqual({
      error: "bad_request",
      message: "The body names the field code twice: send each field once.",
    });
    expect(twice('{"params":{"arguments":{"text":"a","token":"t","text":"b"}}}')).toEqual({
      error: "bad_request",
      message: "The body names the field text twice (in params.arguments): send each field once.",
    });
    expect(twice('{"ids":[{"a":1},{"a":1,"a":2}]}')).toMatchObject({
      message: expect.stringContaining("a twice (in ids.1)"),
    });
    // The same name however it is written: escapes are decoded before names are compared.
    expect(twice('{"code":"x","\\u0063ode":"y"}')).toMatchObject({ message: expect.stringContaining("code twice") });
    expect(twice('{"__proto__":1,"__proto__":2}')).toMatchObject({
      message: expect.stringContaining("__proto__ twice"),
    });
    // A long name comes back cut, as an unknown field's does.
    const long = "k".repeat(40);
    expect(twice(`{"${long}":1,"${long}":2}`)).toMatchObject({
      message: expect.stringContaining(`${"k".repeat(16)}… twice`),
    });
    // The same name in different objects is no duplicate.
    expect(twice('{"a":{"code":1},"b":{"code":2},"code":3}')).toEqual({
      value: { a: { code: 1 }, b: { code: 2 }, code: 3 },
    });
  });

  it("keeps __proto__ an own field, as JSON.parse does", () => {
    const result = parse(Buffer.from('{"__proto__":{"polluted":1},"a":1}'), [3, 9]) as { value: object };
    expect(Object.keys(result.value)).toEqual(["__proto__", "a"]);
    expect(Object.getPrototypeOf(result.value)).toBe(Object.prototype);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
  });

  it("an empty body is {}; whitespace alone is not JSON", () => {
    expect(parse(Buffer.alloc(0))).toEqual({ value: {} });
    expect(parse(Buffer.from(" \n"))).toEqual({ error: "bad_request", message: "The body is not valid JSON." });
  });

  it(`takes ${MAX_BODY_ITEMS} fields and array items, refuses one more`, () => {
    const ids = (n: number) => Buffer.from(`{"ids":[${Array.from({ length: n }, () => '"1"').join(",")}]}`);
    // containers {} and [] count 2, the n - 1 commas the rest
    expect(parse(ids(MAX_BODY_ITEMS - 1))).toHaveProperty("value");
    expect(parse(ids(MAX_BODY_ITEMS))).toMatchObject({
      error: "bad_request",
      message: expect.stringContaining("1,024 fields"),
    });
    const keys = Buffer.from(`{${Array.from({ length: 20_000 }, (_, i) => `"${i.toString(16)}":1`).join(",")}}`);
    expect(parse(keys, [65_536, 131_072])).toMatchObject({
      error: "bad_request",
      message: expect.stringContaining("fields"),
    });
  });

  it(`takes nesting ${MAX_BODY_DEPTH} deep, refuses one more`, () => {
    const nested = (depth: number) => Buffer.from(`${"[".repeat(depth)}${"]".repeat(depth)}`);
    expect(parse(nested(MAX_BODY_DEPTH))).toHaveProperty("value");
    expect(parse(nested(MAX_BODY_DEPTH + 1))).toMatchObject({
      error: "bad_request",
      message: expect.stringContaining("deeper"),
    });
  });

  it("takes the longest legal text in escapes, and keeps a longer string only as far as it takes to see it is too long", () => {
    const escaped = Buffer.from(`{"text":"${"\\u0001".repeat(MAX_TEXT_BYTES)}"}`);
    const taken = parse(escaped, [65_536, 65_539, 1_000_001]) as { value: { text: string } };
    expect(taken.value.text).toBe("\u0001".repeat(MAX_TEXT_BYTES));
    const long = parse(Buffer.from(`{"text":"${"a".repeat(3 * MAX_TEXT_BYTES)}"}`)) as { value: { text: string } };
    expect(long.value.text.length).toBeGreaterThan(MAX_TEXT_BYTES);
    expect(long.value.text.length).toBeLessThan(MAX_TEXT_BYTES + 70_000);
    // Cut between the two halves of a surrogate pair, it never ends in half of one.
    const pairs = MAX_TEXT_BYTES / 2 + 5_000;
    const emoji = Buffer.from(`{"text":"${"\\ud83d\\ude00".repeat(pairs)}"}`);
    // Every chunk ends between the two escapes of a pair.
    const cuts = Array.from({ length: Math.floor(pairs / 1000) }, (_, j) => 9 + 12 * 1000 * (j + 1) + 6);
    const cut = parse(emoji, cuts) as { value: { text: string } };
    expect(cut.value.text.length).toBeGreaterThan(MAX_TEXT_BYTES);
    expect(cut.value.text).toMatch(/^(?:\u{1f600})+$/u);
  });

  it(`refuses more than ${MAX_BODY_STRUCTURE_BYTES} bytes outside strings (a number of a million digits)`, () => {
    expect(parse(Buffer.from(`{"e2e":${"1".repeat(1_000_000)}}`))).toMatchObject({
      error: "bad_request",
      message: expect.stringContaining("outside its strings"),
    });
    // Whitespace runs count as one byte: a pretty-printed body is not refused for its indentation.
    expect(parse(Buffer.from(`{${" ".repeat(1_000_000)}"e2e":${"\n".repeat(1_000_000)}true}`))).toEqual({
      value: { e2e: true },
    });
  });
});
