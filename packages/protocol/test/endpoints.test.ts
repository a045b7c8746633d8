// The endpoint table is the source of the OpenAPI document: every operation of the table is
// in it once, with what SDK generators and linters need (operationId, security, a 4xx answer).
import type { z } from "zod";
import { ENDPOINTS, ERRORS, type EndpointSpec, OPERATION_IDS, buildOpenApiDocument, peerTextField } from "../src";

type Operation = { operationId: string; security: unknown[]; responses: Record<string, unknown> };
const doc = buildOpenApiDocument("https://relay.example");
const operations = Object.values(doc.paths).flatMap((item) => Object.values(item as Record<string, Operation>));

test("the document is OpenAPI 3.1, version 1.0.0, with the table's paths and the three it adds by hand", () => {
  expect(doc.openapi).toBe("3.1.0");
  expect(doc.info.version).toBe("1.0.0");
  // Not operations of the table (openapi.ts adds them): the push stream and the two documents.
  const byHand = ["/v1/stream", "/v1/api", "/v1/openapi.json"];
  const fromTable = OPERATION_IDS.map((id) => ENDPOINTS[id].path as string);
  expect(Object.keys(doc.paths).sort()).toEqual([...new Set([...fromTable, ...byHand])].sort());
  expect(JSON.stringify(doc)).toContain("idempotency_key");
});

test("every operation of the table is in the document with its method, path, security and errors", () => {
  for (const id of OPERATION_IDS) {
    const spec = ENDPOINTS[id];
    const op = (doc.paths[spec.path] as Record<string, Operation>)[spec.method.toLowerCase()]!;
    expect(op.operationId).toBe(id);
    expect(op.security).toEqual(spec.auth === "bearer" ? [{ seatToken: [] }] : []);
    for (const code of spec.errors) expect(Object.keys(op.responses)).toContain(String(ERRORS[code].status));
  }
});

test("every operation has a unique operationId, a security list and a 4xx answer", () => {
  const ids = operations.map((op) => op.operationId);
  expect(new Set(ids).size).toBe(ids.length);
  for (const op of operations) {
    expect(Array.isArray(op.security)).toBe(true);
    expect(Object.keys(op.responses).some((status) => /^4\d\d$/.test(status))).toBe(true);
  }
  expect(doc.info.license.name).toBeTruthy();
});

test("every tool input of the table is a strict object", () => {
  for (const id of OPERATION_IDS) {
    const spec = ENDPOINTS[id] as { tool?: { input?: { safeParse: (v: unknown) => { success: boolean } } } };
    if (spec.tool?.input)
      expect(spec.tool.input.safeParse({ code: "k7dq-3mxa-9z2f", surprise: 1 }).success).toBe(false);
  }
});

test("the self-test is public and answers JSON (longpoll) or an event stream (stream)", () => {
  const op = (doc.paths["/v1/selftest"] as Record<string, Operation>).get!;
  expect(op.security).toEqual([]);
  const ok = op.responses["200"] as { content: Record<string, unknown> };
  expect(Object.keys(ok.content).sort()).toEqual(["application/json", "application/x-ndjson", "text/event-stream"]);
  const stream = (doc.paths["/v1/stream"] as Record<string, Operation>).get!;
  expect(Object.keys((stream.responses["200"] as { content: object }).content).sort()).toEqual([
    "application/x-ndjson",
    "text/event-stream",
  ]);
});

describe("the rules each entry declares (activity, carriesText) agree with the rest of its entry", () => {
  const specs = OPERATION_IDS.map((id) => ENDPOINTS[id] as EndpointSpec);

  test.each(specs.map((spec) => [spec.operationId, spec]))("%s", (_id, spec) => {
    // Activity moves a room's expiry: only a room call can be activity.
    if (spec.activity) expect(spec.room).toBe(true);
    const field = peerTextField(spec);
    if (field !== undefined) {
      // The text is an input field of the call, a string the peer reads...
      const shape = spec.input?.schema.shape as Record<string, z.ZodType> | undefined;
      expect(shape && field in shape).toBe(true);
      expect(shape![field]!.safeParse("a text").success).toBe(true);
      // ...taken from a seat (the own-token refusal needs one), and it can meet each text rule.
      expect(spec.auth).toBe("bearer");
      expect(spec.activity).toBe(true);
      for (const code of ["bad_request", "e2e_required", "insufficient_storage"] as const)
        expect({ code, listed: spec.errors.includes(code) }).toEqual({ code, listed: true });
    }
  });
});
