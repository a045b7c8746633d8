// The documents' endpoint tables and lists of operations, rendered from the endpoint table
// (endpoints.ts) and its zod schemas, and the markers that hold them in a document:
//
//   <!-- generated:NAME -->
//   ...what NAME renders (a block: a table)...
//   <!-- /generated -->
//
// or inline, within a sentence: `(<!-- generated:list:bearer -->send, recv<!-- /generated -->)`.
// `pnpm docs:generate` (infra/scripts/docs-generate.mjs) rewrites every marked section of the
// repository's documents; `pnpm lint` and packages/server/test/unit/generated-docs.test.ts
// fail while one differs.
// Not exported by index.ts: the SDK bundle does not need it.
import { z } from "zod";
import { ENDPOINTS, type EndpointSpec, OPERATION_IDS, peerTextField, SEAT_CALL_ERRORS, waits } from "./endpoints.js";
import { ERRORS, type ErrorCode } from "./errors.js";

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  anyOf?: JsonSchema[];
}

const json = (schema: z.ZodType, io: "input" | "output"): JsonSchema =>
  z.toJSONSchema(schema, { io, unrepresentable: "any" }) as JsonSchema;

const specs = (): EndpointSpec[] => OPERATION_IDS.map((id) => ENDPOINTS[id] as EndpointSpec);

/** A markdown table cell: pipes escaped (inside code spans too, as GitHub wants). */
const cell = (text: string) => text.replace(/\|/g, "\\|").replace(/\n/g, " ");

/** What a field holds, in a query example: `0..25000`, `sse|ndjson`, else `…`. */
function valueHint(schema: JsonSchema): string {
  if (schema.enum) return schema.enum.join("|");
  if (schema.const !== undefined) return String(schema.const);
  if (schema.minimum !== undefined && schema.maximum !== undefined) return `${schema.minimum}..${schema.maximum}`;
  return "…";
}

/** The fields of an object schema: `{a, b?, c: [{d, e}], ok: true}`, one level of nesting shown. */
function shape(schema: JsonSchema, depth = 0): string {
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(properties).map(([name, field]) => {
    const key = required.has(name) ? name : `${name}?`;
    if (field.const !== undefined) return `${key}: ${JSON.stringify(field.const)}`;
    if (field.items?.properties) return `${key}: [${depth === 0 ? shape(field.items, depth + 1) : "{…}"}]`;
    if (field.properties) return `${key}: ${depth === 0 ? shape(field, depth + 1) : "{…}"}`;
    return key;
  });
  return `{${fields.join(", ")}}`;
}

/** The request as the documents write it: `{code, text, idempotency_key?}`, `?code=…[&wait=0..25000]`, or "". */
export function requestShape(spec: EndpointSpec): string {
  if (!spec.input) return "";
  if (spec.input.in === "body") return shape(json(spec.input.schema, "input"));
  // A query's numbers travel as strings: their range is the parsed (output) side's.
  const output = json(spec.input.schema, "output");
  const required = new Set(output.required ?? []);
  const params = Object.entries(output.properties ?? {});
  let query = "";
  for (const [name, field] of params) {
    const pair = `${query === "" ? "?" : "&"}${name}=${valueHint(field)}`;
    query += required.has(name) ? pair : `[${pair}]`;
  }
  return query;
}

/** The 200 answer's fields: `{code, seat, token, …}`. */
export const answerShape = (spec: EndpointSpec): string => shape(json(spec.response, "output"));

/** Codes every room call (and every call with a token) can answer: the tables leave them out. */
const COMMON_CODES = new Set<ErrorCode>(SEAT_CALL_ERRORS);

/** The call's own refusals, as `409 \`unread\``; "–" when it has none beyond the common ones. */
function ownErrors(spec: EndpointSpec): string {
  return (
    [...new Set(spec.errors)]
      .filter((code) => !COMMON_CODES.has(code))
      .map((code) => `${ERRORS[code].status} \`${code}\``)
      .join(", ") || "–"
  );
}

const auth = (spec: EndpointSpec) => (spec.auth === "bearer" ? "Bearer" : "–");
const code = (text: string) => (text === "" ? "" : `\`${text}\``);

/** The recipe's table (GET /v1/api): every operation, for a first look. */
export function callTable(): string {
  const rows = specs().map((spec) => {
    const request = requestShape(spec);
    const call =
      spec.input?.in === "query"
        ? code(`${spec.method} ${spec.path}${request}`)
        : `${code(`${spec.method} ${spec.path}`)}${request ? ` ${code(request)}` : ""}`;
    return `| ${cell(call)} | ${auth(spec)} | ${cell(spec.summary)} | ${cell(code(answerShape(spec)))} |`;
  });
  return ["| Call | Auth | What | Answer |", "|---|---|---|---|", ...rows].join("\n");
}

/** docs/protocol.md §4's table: every operation with what it does, its request, answer and own refusals. */
export function protocolTable(): string {
  const rows = specs().map(
    (spec) =>
      `| ${code(`${spec.method} ${spec.path}`)} | ${cell(spec.summary)} | ${auth(spec)} | ${cell(code(requestShape(spec)))} | ` +
      `${cell(code(answerShape(spec)))} | ${ownErrors(spec)} |`,
  );
  return [
    "| Method and path | What | Auth | Request | Answer 200 | Refusals of its own |",
    "|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

const yes = (flag: boolean) => (flag ? "yes" : "–");

/** What a call's text for the peer is: the input field that carries one, `answer` when the answer holds the peer's texts. */
function peerText(spec: EndpointSpec): string {
  const field = peerTextField(spec);
  if (field !== undefined) return `\`${field}\``;
  return spec.carriesText ? "answer" : "–";
}

/**
 * docs/protocol.md §4's rules table: per operation, each rule that applies to it, one column a
 * rule (the seat token, the User-Agent policy, activity, a text for the peer, waits, changes
 * and write-ack, the MCP tool). The other documents say a rule once and link here.
 */
export function rulesTable(): string {
  const rows = specs().map(
    (spec) =>
      `| \`${spec.operationId}\` | ${code(`${spec.method} ${spec.path}`)} | ${yes(spec.auth === "bearer")} | ` +
      `${yes(spec.room)} | ${yes(spec.activity)} | ${peerText(spec)} | ${yes(waits(spec))} | ` +
      `${yes(LISTS.changes!(spec))} | ${spec.tool ? `\`${spec.operationId}\`` : "–"} |`,
  );
  return [
    "| Operation | Method and path | Seat token | Room call | Activity | Text for the peer | Waits | Changes the room | MCP tool |",
    "|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

/** A tool argument as the MCP tool table writes it: `wait?` (0–25000). */
function argument(name: string, field: JsonSchema, required: boolean): string {
  const range =
    field.minimum !== undefined && field.maximum !== undefined ? ` (${field.minimum}–${field.maximum})` : "";
  return `\`${name}${required ? "" : "?"}\`${range}`;
}

/** docs/protocol.md §11.7's tool table: every tool, its arguments (the token added for seat calls) and what it returns. */
export function mcpToolTable(): string {
  const rows = specs().flatMap((spec) => {
    if (!spec.tool) return [];
    const input = json(spec.tool.input ?? spec.input?.schema ?? z.strictObject({}), "input");
    const required = new Set(input.required ?? []);
    const args = Object.entries(input.properties ?? {}).map(([name, field]) =>
      argument(name, field, required.has(name)),
    );
    if (spec.auth === "bearer") args.splice(Math.min(1, args.length), 0, "`token`");
    const answer = json(spec.tool.output ?? spec.response, "output");
    const returns = Object.keys(answer.properties ?? {}).map((name) =>
      answer.required?.includes(name) ? `\`${name}\`` : `\`${name}?\``,
    );
    return [
      `| \`${spec.operationId}\` | ${cell(spec.tool.title)} | ${args.join(", ") || "none"} | ${returns.join(", ")} |`,
    ];
  });
  return ["| tool | what | arguments | returns |", "|---|---|---|---|", ...rows].join("\n");
}

/** The operations a list names, by the list's name. */
const LISTS: Record<string, (spec: EndpointSpec) => boolean> = {
  /** Room calls: the User-Agent policy applies. */
  room: (spec) => spec.room,
  /** Calls that take a seat token. */
  bearer: (spec) => spec.auth === "bearer",
  /** Calls that move their room's idle expiry when they start. */
  activity: (spec) => spec.activity,
  /** Calls whose input carries a text for the peer (the own-token, envelope and byte-budget rules). */
  "text-in": (spec) => peerTextField(spec) !== undefined,
  /** Calls that are MCP tools. */
  tools: (spec) => spec.tool !== undefined,
  /** Room calls that change the room (every room call that is no read). */
  changes: (spec) => spec.room && spec.method === "POST",
  /** Room calls that can hold their answer (a `wait`): their answer time is the wait. */
  waits: (spec) => spec.room && waits(spec),
  /** Room calls that never hold their answer: the dashboard's answer-time panels. */
  "no-wait": (spec) => spec.room && !waits(spec),
};

/**
 * `list:<which>[:and|:or][:code]`: the operations of a list, in the table's order, comma-
 * separated; `and`/`or` joins the last two with the word, `code` puts each in backticks.
 */
function list(name: string): string | undefined {
  const [, which, ...options] = name.split(":");
  const filter = LISTS[which ?? ""];
  if (!filter) return undefined;
  const ids = specs()
    .filter(filter)
    .map((spec) => (options.includes("code") ? `\`${spec.operationId}\`` : spec.operationId));
  const word = options.find((option) => option === "and" || option === "or");
  if (!word || ids.length < 2) return ids.join(", ");
  return `${ids.slice(0, -1).join(", ")} ${word} ${ids.at(-1)}`;
}

/** `operationList("changes")`: "open, join, send, ack, close", as a `list:changes` section renders it. */
export const operationList = (which: string): string => {
  const rendered = list(`list:${which}`);
  if (rendered === undefined) throw new Error(`no list of operations named ${which}`);
  return rendered;
};

/**
 * The room calls that never hold their answer (no `wait`): what the dashboard's answer-time
 * panels plot. The panels select them by label (`method="POST"` under `/v1/`), since every call
 * that waits is a GET; the server's dashboard test holds the two together.
 */
export const ANSWER_TIME_PATHS: string[] = specs()
  .filter(LISTS["no-wait"]!)
  .map((spec) => spec.path);

/** What a section of a document renders, by name; undefined for a name this package does not know. */
export function endpointSection(name: string): string | undefined {
  if (name === "endpoints:protocol") return protocolTable();
  if (name === "endpoints:rules") return rulesTable();
  if (name === "endpoints:mcp") return mcpToolTable();
  if (name.startsWith("list:")) return list(name);
  return undefined;
}

const MARKED = /<!-- generated:([a-z0-9:_-]+) -->([\s\S]*?)<!-- \/generated -->/g;

/**
 * The document with every marked section rendered anew by `render` (block sections keep a
 * blank line inside their markers). A name `render` does not know is left as it is when
 * `partial`, else an error, so that a misspelt marker never silently stops being generated.
 */
export function fillGenerated(
  document: string,
  render: (name: string) => string | undefined,
  { file = "the document", partial = false }: { file?: string; partial?: boolean } = {},
): string {
  return document.replace(MARKED, (whole, name: string, inside: string) => {
    const content = render(name);
    if (content === undefined) {
      if (partial) return whole;
      throw new Error(`${file}: no generator for the section <!-- generated:${name} -->`);
    }
    const block = inside.startsWith("\n");
    return `<!-- generated:${name} -->${block ? `\n\n${content}\n\n` : content}<!-- /generated -->`;
  });
}

/** The names of a document's marked sections. */
export const generatedSections = (document: string): string[] =>
  [...document.matchAll(MARKED)].map((match) => match[1]!);
