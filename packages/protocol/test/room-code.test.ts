import { randomBytes } from "node:crypto";
import {
  buildOpenApiDocument,
  normalizeRoomCode,
  roomCodeFromBytes,
  RecvQuery,
  SendRequest,
  wholeNumbersUpTo,
} from "../src/index.js";

describe("room codes", () => {
  it("mints three groups of four Crockford base32 characters", () => {
    for (let i = 0; i < 200; i++)
      expect(roomCodeFromBytes(randomBytes(8))).toMatch(/^[0-9a-hjkmnp-tv-z]{4}(-[0-9a-hjkmnp-tv-z]{4}){2}$/);
  });
  it("tolerates case, spaces, missing or extra dashes and look-alike letters", () => {
    expect(normalizeRoomCode(" K7DQ3MXA9Z2F ")).toBe("k7dq-3mxa-9z2f");
    expect(normalizeRoomCode("k7dq--3mxa-9z2f-")).toBe("k7dq-3mxa-9z2f");
    expect(normalizeRoomCode("k7dq 3mxa 9z2f")).toBe("k7dq-3mxa-9z2f");
    expect(normalizeRoomCode("Oi1L-0000-0000")).toBe("0111-0000-0000");
  });
  it("refuses what cannot be a code", () => {
    for (const bad of ["", "k7dq-3mxa", "k7dq-3mxa-9z2f-a", "k7dq-3mxa-9z2u", "k7dq_3mxa_9z2f"])
      expect(normalizeRoomCode(bad)).toBeUndefined();
  });
});

describe("schemas", () => {
  it("the wait pattern (the OpenAPI document's) takes exactly 0..25000", () => {
    // Every number is tried; one expect per range (90,000 expects took 22-31 s on a loaded CI).
    const misjudged = (re: RegExp, max: number, upTo: number) =>
      Array.from({ length: upTo + 1 }, (_, n) => n).filter((n) => re.test(String(n)) !== n <= max);
    const pattern = wholeNumbersUpTo(25_000);
    expect(misjudged(pattern, 25_000, 30_000)).toEqual([]);
    for (const text of ["007", "025000", "", "-1", "1.5", "1e3", "25001", "99999"])
      expect(pattern.test(text)).toBe(["007", "025000"].includes(text));
    for (const path of ["/v1/recv", "/v1/status"]) {
      const operation = (buildOpenApiDocument().paths as any)[path].get;
      const wait = operation.parameters.find((p: { name: string }) => p.name === "wait");
      expect(JSON.stringify(wait.schema)).toContain(JSON.stringify(pattern.source));
    }
    for (const max of [0, 7, 10, 99, 100, 1234, 60_000]) {
      expect(misjudged(wholeNumbersUpTo(max), max, max + 200)).toEqual([]);
    }
  });

  it("bounds wait to whole milliseconds in 0..25000", () => {
    expect(RecvQuery.parse({ code: "k7dq-3mxa-9z2f", wait: "25000" }).wait).toBe(25000);
    expect(RecvQuery.parse({ code: "k7dq-3mxa-9z2f", wait: "0" }).wait).toBe(0);
    for (const wait of ["25001", "-1", "1.5", "", "abc"])
      expect(RecvQuery.safeParse({ code: "k7dq-3mxa-9z2f", wait }).success).toBe(false);
  });
  it("accepts idempotency keys of 1 to 128 visible ASCII characters only", () => {
    const send = (key: string) =>
      SendRequest.safeParse({ code: "k7dq-3mxa-9z2f", text: "x", idempotency_key: key }).success;
    expect(send("!")).toBe(true);
    expect(send("~".repeat(128))).toBe(true);
    expect(send("a".repeat(129))).toBe(false);
    expect(send("")).toBe(false);
    expect(send("has space")).toBe(false);
    expect(send("é")).toBe(false);
  });
  it("refuses unknown fields so that a misspelt option is not silently ignored", () => {
    expect(SendRequest.safeParse({ code: "k7dq-3mxa-9z2f", text: "x", idempotencyKey: "k" }).success).toBe(false);
  });
});
