// The documents' endpoint tables and lists of operations are rendered from the endpoint
// table (src/endpoint-docs.ts); this holds the renderers to the table, and the documents to
// what they render (`pnpm docs:generate` rewrites them; the server's generated-docs test and
// `pnpm lint` check every generated file, this one the sections this package renders).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ENDPOINTS, type EndpointSpec, OPERATION_IDS, waits } from "../src";
import {
  ANSWER_TIME_PATHS,
  callTable,
  endpointSection,
  fillGenerated,
  generatedSections,
  mcpToolTable,
  operationList,
  protocolTable,
  requestShape,
  rulesTable,
} from "../src/endpoint-docs";

const ROOT = join(__dirname, "../../..");
const specs = OPERATION_IDS.map((id) => ENDPOINTS[id] as EndpointSpec);

describe.each([
  ["docs/protocol.md", "endpoints:protocol"],
  ["docs/protocol.md", "endpoints:rules"],
  ["docs/protocol.md", "endpoints:mcp"],
])("%s", (file, section) => {
  const document = readFileSync(join(ROOT, file), "utf8");

  it(`holds the ${section} table between its markers`, () => {
    expect(generatedSections(document)).toContain(section);
  });

  it("says what the endpoint table says (run `pnpm docs:generate` to update it)", () => {
    // Compared line by line, so a failure names the row that differs.
    expect(document.split("\n")).toEqual(fillGenerated(document, endpointSection, { file, partial: true }).split("\n"));
  });
});

test("the tables have a row per operation (per tool for MCP), in the table's order", () => {
  const rows = (table: string) => table.split("\n").slice(2);
  expect(rows(callTable()).map((row) => row.split("`")[1]!.split(/[?[]/)[0])).toEqual(
    specs.map((spec) => `${spec.method} ${spec.path}`),
  );
  expect(rows(rulesTable()).map((row) => row.split("`")[1])).toEqual(specs.map((s) => s.operationId));
  expect(rows(protocolTable()).map((row) => row.split("`")[1])).toEqual(specs.map((s) => `${s.method} ${s.path}`));
  expect(rows(mcpToolTable()).map((row) => row.split("`")[1])).toEqual(
    specs.filter((s) => s.tool).map((s) => s.operationId),
  );
});

test("a request names every field, optional ones marked", () => {
  expect(requestShape(ENDPOINTS.send)).toBe("{code, text, idempotency_key?, ack?}");
  expect(requestShape(ENDPOINTS.recv)).toBe("?code=…[&wait=0..25000][&ack=…]");
  expect(requestShape(ENDPOINTS.stats)).toBe("");
});

test("the lists of operations follow the table", () => {
  const ids = (keep: (spec: EndpointSpec) => boolean) => specs.filter(keep).map((spec) => spec.operationId);
  const bearer = ids((spec) => spec.auth === "bearer");
  expect(bearer).toContain("send");
  expect(endpointSection("list:bearer:and")).toBe(`${bearer.slice(0, -1).join(", ")} and ${bearer.at(-1)}`);
  expect(endpointSection("list:tools:code")).toBe(
    ids((spec) => spec.tool !== undefined)
      .map((id) => `\`${id}\``)
      .join(", "),
  );
  expect(endpointSection("list:nope")).toBeUndefined();
  // The answer-time panels: the room calls that answer at once, never those that wait.
  expect(ANSWER_TIME_PATHS).toContain("/v1/send");
  for (const path of ["/v1/recv", "/v1/status", "/v1/selftest", "/v1/stats"])
    expect(ANSWER_TIME_PATHS).not.toContain(path);
});

test("the rules table marks each operation as its lists do, a column per rule", () => {
  const rows = rulesTable()
    .split("\n")
    .slice(2)
    .map((row) => row.split(" | ").map((c) => c.replace(/^\| |`| \|$/g, "")));
  const marked = (column: number) => rows.filter((row) => row[column] !== "–").map((row) => row[0]!);
  const named = (list: string) => operationList(list).split(", ");
  expect(marked(2)).toEqual(named("bearer"));
  expect(marked(3)).toEqual(named("room"));
  expect(marked(4)).toEqual(named("activity"));
  expect(rows.filter((row) => !["–", "answer"].includes(row[5]!)).map((row) => row[0])).toEqual(named("text-in"));
  expect(rows.find((row) => row[0] === "send")![5]).toBe("text");
  expect(rows.find((row) => row[0] === "recv")![5]).toBe("answer");
  expect(marked(6).filter((id) => ENDPOINTS[id as keyof typeof ENDPOINTS].room)).toEqual(named("waits"));
  expect(marked(7)).toEqual(named("changes"));
  expect(marked(8)).toEqual(named("tools"));
});

test("every call that waits is a GET, so the POST room calls are those that never wait", () => {
  // The dashboard's answer-time panels select the calls that never wait by method="POST".
  for (const spec of specs)
    if (waits(spec))
      expect({ call: spec.operationId, method: spec.method }).toEqual({ call: spec.operationId, method: "GET" });
  expect(ANSWER_TIME_PATHS).toEqual(specs.filter((s) => s.room && s.method === "POST").map((s) => s.path));
});

test("a marker with no generator is an error, not a section left alone", () => {
  expect(() => fillGenerated("a <!-- generated:nope -->x<!-- /generated --> b", endpointSection)).toThrow(
    /no generator for the section <!-- generated:nope -->/,
  );
  expect(fillGenerated("a <!-- generated:list:room -->x<!-- /generated --> b", endpointSection)).toBe(
    `a <!-- generated:list:room -->${endpointSection("list:room")}<!-- /generated --> b`,
  );
});
