// The endpoint tables people read, README.md's and docs/protocol.md §4's, say what the
// endpoint table says: a row for every operation, with its method and path, its auth, the
// fields it takes and the fields it answers; docs/mcp.md's tool table likewise for the MCP
// tools. The prose in the cells stays hand-written; an operation added to or changed in the
// table fails here until the documents follow.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { z } from "zod";
import { ENDPOINTS, type EndpointSpec, OPERATION_IDS } from "../src";

const ROOT = join(__dirname, "../../..");

interface Row {
  line: number;
  method: string;
  path: string;
  auth: string;
  request?: string;
  answer: string;
}

/** The rows of the markdown table whose header row is `header`, each cell's text. */
function tableRows(file: string, header: string): string[][] {
  const lines = readFileSync(join(ROOT, file), "utf8").split("\n");
  const start = lines.indexOf(header);
  if (start < 0) throw new Error(`${file}: no table with the header ${header}`);
  const rows: string[][] = [];
  for (let i = start + 2; i < lines.length && lines[i]!.startsWith("|"); i++)
    rows.push(
      lines[i]!.slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim()),
    );
  return rows;
}

/** The backticked spans of a cell. */
const spans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** The top-level field names of `{a, b?: …, c: [{…}]}`, with "?" kept on optional ones. */
function topLevelFields(shape: string): string[] {
  const inner = shape.trim().replace(/^\{/, "").replace(/\}$/, "");
  const fields: string[] = [];
  let depth = 0;
  let current = "";
  for (const char of inner) {
    if ("{[(".includes(char)) depth++;
    if ("}])".includes(char)) depth--;
    if (char === "," && depth === 0) {
      fields.push(current);
      current = "";
    } else current += char;
  }
  fields.push(current);
  return fields.map((field) => field.split(":")[0]!.trim()).filter(Boolean);
}

/** The query parameter names of `?code=…&wait=0..25000`. */
const queryFields = (query: string) =>
  query
    .replace(/^\?/, "")
    .split("&")
    .map((pair) => pair.split("=")[0]!);

const shapeOf = (schema: z.ZodType) => (schema as unknown as z.ZodObject).shape;
const isOptional = (schema: z.ZodType) => schema.safeParse(undefined).success;

function readmeRows(): Row[] {
  return tableRows("README.md", "| Call | Auth | Answer |").map(([call, auth, answer], index) => {
    const [route, request] = spans(call!);
    const [method, pathAndQuery] = route!.split(" ");
    const [path, query] = pathAndQuery!.split(/(?=\?)/);
    return { line: index + 1, method: method!, path: path!, auth: auth!, request: query ?? request, answer: answer! };
  });
}

function protocolRows(): Row[] {
  return tableRows("docs/protocol.md", "| Method and path | Auth | Request | Answer 200 |").flatMap(
    ([route, auth, request, answer], index) =>
      // A row may name several paths (`GET /healthz`, `GET /readyz`).
      spans(route!).map((span) => {
        const [method, path] = span.split(" ");
        return {
          line: index + 1,
          method: method!,
          path: path!,
          auth: auth!,
          request: spans(request!)[0],
          answer: answer!,
        };
      }),
  );
}

/** What is wrong with the row of one operation, if anything. */
function problems(spec: EndpointSpec, row: Row): string[] {
  const found: string[] = [];
  const where = `${spec.method} ${spec.path}`;
  const auth = spec.auth === "bearer" ? /^Bearer/ : /^–$/;
  if (!auth.test(row.auth)) found.push(`${where}: auth is "${row.auth}", the table says ${spec.auth}`);

  const input = spec.input ? shapeOf(spec.input.schema) : {};
  const said = row.request ?? "";
  if (spec.input?.in === "query") {
    const names = said.startsWith("?") ? queryFields(said) : [];
    if (names.sort().join() !== Object.keys(input).sort().join())
      found.push(`${where}: query "${said}", the table's fields are ${Object.keys(input).join(", ")}`);
  } else {
    const expected = Object.entries(input).map(([name, field]) => name + (isOptional(field) ? "?" : ""));
    const names = said.startsWith("{") ? topLevelFields(said) : [];
    if (names.sort().join() !== expected.sort().join())
      found.push(`${where}: request "${said}", the table's body is {${expected.join(", ")}}`);
  }

  const answer = spans(row.answer).find((span) => span.startsWith("{"));
  const fields = shapeOf(spec.response);
  const named = answer ? topLevelFields(answer).map((name) => name.replace(/\?$/, "")) : [];
  const required = Object.keys(fields).filter((name) => !isOptional(fields[name]!));
  for (const name of required)
    if (!named.includes(name)) found.push(`${where}: the answer does not name ${name} (${answer ?? "no {…}"})`);
  for (const name of named)
    if (!(name in fields)) found.push(`${where}: the answer names ${name}, which the response schema does not have`);
  return found;
}

describe.each([
  ["README.md", readmeRows],
  ["docs/protocol.md", protocolRows],
])("the endpoint table of %s", (_file, rowsOf) => {
  const rows = rowsOf();

  it("has one row per operation, with its auth, request fields and answer fields", () => {
    const found: string[] = [];
    for (const id of OPERATION_IDS) {
      const spec: EndpointSpec = ENDPOINTS[id];
      const matching = rows.filter((row) => row.method === spec.method && row.path === spec.path);
      if (matching.length !== 1) found.push(`${spec.method} ${spec.path}: ${matching.length} rows`);
      else found.push(...problems(spec, matching[0]!));
    }
    expect(found).toEqual([]);
  });

  it("lists a table path only with the table's method", () => {
    const methods = new Map(OPERATION_IDS.map((id) => [ENDPOINTS[id].path as string, ENDPOINTS[id].method as string]));
    const wrong = rows.filter((row) => methods.has(row.path) && methods.get(row.path) !== row.method);
    expect(wrong.map((row) => `${row.method} ${row.path}`)).toEqual([]);
  });
});

describe("the tool table of docs/mcp.md", () => {
  const rows = tableRows("docs/mcp.md", "| tool | arguments | returns |");
  const tools = OPERATION_IDS.filter((id) => ENDPOINTS[id].tool !== undefined);

  it("has one row per tool, in the table's order, with its arguments and what it returns", () => {
    expect(rows.map(([tool]) => spans(tool!)[0])).toEqual(tools);
    const found: string[] = [];
    for (const [tool, args, returns] of rows) {
      const spec: EndpointSpec = ENDPOINTS[spans(tool!)[0] as (typeof tools)[number]];
      const input = spec.tool?.input ?? spec.input?.schema;
      const expected = [
        ...Object.entries(input ? shapeOf(input) : {}).map(([name, field]) => name + (isOptional(field) ? "?" : "")),
        ...(spec.auth === "bearer" ? ["token"] : []),
      ];
      if (spans(args!).sort().join() !== expected.sort().join())
        found.push(`${spec.operationId}: arguments ${args}, the tool takes ${expected.join(", ")}`);
      const fields = shapeOf(spec.response);
      const named = spans(returns!);
      for (const name of Object.keys(fields).filter((key) => !isOptional(fields[key]!)))
        if (!named.includes(name)) found.push(`${spec.operationId}: returns does not name ${name}`);
      for (const name of named)
        if (!(name in fields)) found.push(`${spec.operationId}: returns names ${name}, which the tool does not return`);
    }
    expect(found).toEqual([]);
  });
});
