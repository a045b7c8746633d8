// Generated malformed requests across every endpoint (fast-check): wrong methods, broken and
// hostile JSON, wrong field types and sizes, odd query strings, bad tokens, odd headers.
// Whatever comes in: no 5xx, no crash (the relay runs as its own process here), and every
// refusal is the documented {"error","message"} with a code and status from the catalogue.
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import fc from "fast-check";
import { ENDPOINTS as TABLE_ENDPOINTS, ERRORS, type EndpointSpec, OPERATION_IDS, waits } from "@duet/protocol";
import type { TestClient } from "../support/http-client";
import { useTarget } from "../support/targets";

const RUNS = Number(process.env.DUET_FUZZ_RUNS ?? 300);

/** A call of the table that holds its answer with no input at all (the self-test's default wait): left out. */
const holdsWhenBare = (spec: EndpointSpec) => waits(spec) && spec.input?.required === false;
const TABLE = OPERATION_IDS.map((id) => TABLE_ENDPOINTS[id] as EndpointSpec);

/** Every call of the endpoint table, then the paths outside it (documents, the join page, no route). */
const ENDPOINTS: (readonly [string, string])[] = [
  ...TABLE.filter((spec) => !holdsWhenBare(spec)).map((spec) => [spec.method, spec.path] as const),
  ["GET", "/v1/api"],
  ["GET", "/v1/openapi.json"],
  ["GET", "/join/CODE"],
  ["GET", "/v1/nope"],
];

interface Room {
  code: string;
  a: string;
}

const ascii = (max: number) =>
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: max });
const weirdString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  ascii(40),
  fc.constantFrom(
    "",
    " ",
    "\u0000",
    "\ud800",
    "k7dq-3mxa-9z2f",
    "--------",
    "a".repeat(10_000),
    "é".repeat(3000),
    "__proto__",
    "constructor",
    "../../etc/passwd",
    "%00",
    "${jndi:x}",
  ),
);
const anyJson = fc.oneof(fc.jsonValue({ maxDepth: 3 }), weirdString, fc.constantFrom(null, true, 0, -1, 1e308, [], {}));

/** The body fields of the table's calls. */
const BODY_FIELDS = [
  ...new Set(TABLE.flatMap((spec) => (spec.input?.in === "body" ? Object.keys(spec.input.schema.shape) : []))),
];
/** Values near a field's own rules, besides any JSON; a field not named here gets any JSON. */
const FIELD_VALUES: Record<string, fc.Arbitrary<unknown>> = {
  code: fc.oneof(fc.constant("VALID"), anyJson),
  idempotency_key: fc.oneof(ascii(130), fc.constantFrom("", "k\u0000", "ключ", "a".repeat(129)), anyJson),
  ids: fc.oneof(fc.array(anyJson, { maxLength: 70 }), anyJson),
};

/** A request: what to change from a well-formed call. */
const requestArb = fc.record({
  endpoint: fc.constantFrom(...ENDPOINTS),
  // Mostly the right method, so that the request reaches validation.
  method: fc.oneof(
    { weight: 4, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS") },
  ),
  auth: fc.constantFrom("valid", "none", "random", "bearer-random", "basic", "empty-bearer", "two-tokens"),
  authRandom: ascii(60),
  bodyKind: fc.constantFrom("fields", "json", "bytes", "truncated", "empty", "deep", "array", "duplicate-keys"),
  // Every body field of the table (any JSON, or values near its own rules), and one it has not.
  fields: fc.record(
    {
      ...Object.fromEntries(BODY_FIELDS.map((name) => [name, FIELD_VALUES[name] ?? anyJson])),
      extra: anyJson,
    } as Record<string, fc.Arbitrary<unknown>>,
    { requiredKeys: [] },
  ),
  json: anyJson,
  bytes: fc.uint8Array({ maxLength: 200 }),
  query: fc.oneof(
    fc.constant(""),
    fc.constantFrom(
      "?code=VALID&wait=abc",
      "?code=VALID&wait=-1",
      "?code=VALID&wait=25001",
      "?code=VALID&wait=1.5",
      "?code=VALID&wait=1e3",
      "?code=VALID&wait=",
      "?code=VALID&code=VALID",
      "?code[]=x",
      "?code=%ZZ",
      "?wait=0",
      `?code=${"x".repeat(5000)}`,
      "?code=VALID&wait=0&wait=0",
      "?code=VALID&__proto__=1",
    ),
    fc.webQueryParameters().map((q) => `?${q}`),
  ),
  contentType: fc.constantFrom(
    "application/json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "",
    "application/json; charset=latin1",
    "application/json; charset=utf-16",
  ),
  contentEncoding: fc.oneof(
    { weight: 6, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constantFrom("gzip", "br", "deflate", "identity", "x-unknown") },
  ),
  userAgent: fc.oneof(
    { weight: 6, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constantFrom("", "curl/8.0", "python-requests/2.31", "duet/0.1", "Mozilla/5.0", "DUET/9"),
        ascii(30),
      ),
    },
  ),
});

type RequestCase = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

function build(request: RequestCase, room: Room) {
  const [defaultMethod, rawPath] = request.endpoint;
  const method = request.method ?? defaultMethod;
  const codeInPath =
    typeof request.fields.code === "string" && request.fields.code !== "VALID"
      ? request.fields.code.slice(0, 200)
      : room.code;
  let path: string;
  try {
    path = rawPath.replace("CODE", encodeURIComponent(codeInPath));
  } catch {
    path = rawPath.replace("CODE", "%ED%A0%80"); // a lone surrogate has no UTF-8 form: send its CESU bytes
  }
  const query = request.query.replaceAll("VALID", room.code);
  const headers: Record<string, string> = {};
  if (request.userAgent !== undefined) headers["user-agent"] = request.userAgent;
  if (request.contentType) headers["content-type"] = request.contentType;
  if (request.contentEncoding) headers["content-encoding"] = request.contentEncoding;
  const auth = {
    valid: `Bearer ${room.a}`,
    none: undefined,
    random: request.authRandom,
    "bearer-random": `Bearer ${request.authRandom}`,
    basic: `Basic ${Buffer.from("a:b").toString("base64")}`,
    "empty-bearer": "Bearer ",
    "two-tokens": `Bearer ${room.a} ${room.a}`,
  }[request.auth];
  if (auth !== undefined) headers.authorization = auth;
  const fields = Object.fromEntries(Object.entries(request.fields).map(([k, v]) => [k, v === "VALID" ? room.code : v]));
  let rawBody: string | Buffer | undefined;
  switch (request.bodyKind) {
    case "fields":
      rawBody = JSON.stringify(fields);
      break;
    case "json":
      rawBody = JSON.stringify(request.json) ?? "";
      break;
    case "bytes":
      rawBody = Buffer.from(request.bytes);
      break;
    case "truncated":
      rawBody = JSON.stringify(fields).slice(0, -3);
      break;
    case "empty":
      rawBody = "";
      break;
    case "deep":
      rawBody = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
      break;
    case "array":
      rawBody = JSON.stringify([fields]);
      break;
    case "duplicate-keys":
      rawBody = `{"code":"${room.code}","code":${JSON.stringify(fields.code ?? null)},"text":"a","text":${JSON.stringify(fields.text ?? null)}}`;
      break;
  }
  if (method === "GET" || method === "OPTIONS") rawBody = undefined;
  return { method, path: `${path}${query}`, headers, rawBody };
}

describe.each(["process", "memory"] as const)("bad input on %s", (kind) => {
  const target = useTarget(kind, kind === "process" ? { REDIS_URL: process.env.REDIS_URL! } : {});

  it(`${RUNS} generated malformed requests: 5xx 0, crashes 0, every refusal a documented error`, async () => {
    const client = target().client as TestClient;
    let room = await client.pairedRoom();
    const statuses = new Map<number, number>();
    const problems: string[] = [];
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(requestArb, async (request) => {
        // A fuzzed close may end the room; keep a live one for "valid" tokens.
        if (sent % 25 === 0) room = await client.pairedRoom();
        const { method, path, headers, rawBody } = build(request, room);
        sent++;
        let reply;
        try {
          reply = await fetch(new URL(path, client.baseUrls[0]), {
            method,
            headers: { "user-agent": "duet/0.1", ...headers },
            body: rawBody,
          });
        } catch (error) {
          // Header values fetch itself refuses (it validates them) are not a server result.
          if (String((error as Error).message).includes("header")) return;
          problems.push(`${method} ${path.slice(0, 80)}: no answer (${String(error)})`);
          return;
        }
        const text = await reply.text();
        statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
        const describe = `${method} ${path.slice(0, 80)} ${request.bodyKind} -> ${reply.status} ${text.slice(0, 120)}`;
        if (reply.status >= 500) problems.push(describe);
        if (reply.status >= 400) {
          let body: { error?: string; message?: string } = {};
          try {
            body = JSON.parse(text);
          } catch {
            problems.push(`not JSON: ${describe}`);
            return;
          }
          const entry = body.error ? (ERRORS as Record<string, { status: number }>)[body.error] : undefined;
          if (
            !entry ||
            entry.status !== reply.status ||
            typeof body.message !== "string" ||
            Object.keys(body).sort().join() !== "error,message"
          )
            problems.push(`undocumented: ${describe}`);
          if (/\bat .*\(.*:\d+:\d+\)|node_modules|SyntaxError|TypeError/.test(text))
            problems.push(`internal detail: ${describe}`);
        }
      }),
      { numRuns: RUNS },
    );
    const health = await client.call("GET", "/healthz");
    const relay = target();
    const crashed = relay.process ? relay.process.exitCode !== null || relay.process.signalCode !== null : false;
    const internalErrors = (relay.logs().match(/"msg":"internal error"/g) ?? []).length;
    console.log(
      `FIGURES bad-input ${kind} ${JSON.stringify({ requests: sent, statuses: Object.fromEntries([...statuses].sort()), problems: problems.length, crashed, internalErrors })}`,
    );
    expect(problems.slice(0, 20)).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(200);
    expect(crashed).toBe(false);
    expect(health.status).toBe(200);
    expect(internalErrors).toBe(0);
  }, 120_000);
});

describe("compressed bodies", () => {
  const target = useTarget("memory", { LOG_LEVEL: "silent" });

  // Found by the generator above: a body that does not match its Content-Encoding was a 500.
  it.each(["gzip", "br", "deflate"])(
    "%s: a body that does not decompress is 400 bad_request; one that does is read",
    async (encoding) => {
      const garbage = await target().client.call("POST", "/v1/open", {
        rawBody: "{}",
        headers: { "content-encoding": encoding, "content-type": "application/json" },
      });
      expect({ status: garbage.status, error: garbage.body.error }).toEqual({ status: 400, error: "bad_request" });
      const compress = { gzip: gzipSync, br: brotliCompressSync, deflate: deflateSync }[encoding]!;
      const good = await target().client.call("POST", "/v1/open", {
        rawBody: compress(Buffer.from("{}")),
        headers: { "content-encoding": encoding, "content-type": "application/json" },
      });
      expect(good.status).toBe(200);
    },
  );
});
