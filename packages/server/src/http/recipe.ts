// The recipe served at GET /v1/api: the whole protocol for an agent that has never seen
// duet, with examples that can be pasted as they are. The text is recipe.md beside this file,
// a markdown template: `{{name}}` is a value below, `{{curl_NAME}}` the curl line of the
// example call NAME (EXAMPLES: how to call it comes from the endpoint table), and
// `{{sh:/path}}` the relay's base URL and that path as one single-quoted shell word (the base
// comes from the request's Host when PUBLIC_URL is unset: quoted, nothing in it can reach a
// shell as anything but a URL). The list of calls is the endpoint table's too.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  E2E_OPENSSL_RECIPE,
  ENDPOINTS,
  type EndpointInput,
  type EndpointSpec,
  ERRORS,
  e2eMaxTextBytes,
  type ErrorCode,
  FIRST_WAIT_MS,
  MAX_ACK_IDS,
  MAX_PENDING_BYTES,
  MAX_PENDING_MESSAGES,
  MAX_TEXT_BYTES,
  MAX_WAIT_MS,
  type OperationId,
  STREAM_ENDPOINT,
  type StreamQuery,
  USER_AGENT,
} from "@duet/protocol";
import { callTable, operationList } from "@duet/protocol/endpoint-docs";
import type { z } from "zod";
import { CONFIG_DEFAULTS, type Config } from "../config.js";
import { shellQuote } from "./shell.js";

/** What the recipe states of the relay's configuration. */
export type RecipeSettings = Pick<
  Config,
  "roomIdleMs" | "roomMaxMs" | "roomEndingKeepMs" | "roomsPerClient" | "mcpMaxWaitMs"
>;

const TEMPLATE = readFileSync(join(__dirname, "recipe.md"), "utf8");

/** The room code of every example. */
const CODE = "k7dq-3mxa-9z2f";

/** A call of the recipe's flow: an operation of the endpoint table (or the stream) and its input as sent. */
export interface RecipeExample {
  spec: Pick<EndpointSpec, "method" | "path" | "auth" | "input">;
  input: Record<string, unknown>;
  /** Held open: curl must not buffer it (-N). */
  stream?: true;
}

const example = <K extends OperationId>(id: K, input: NonNullable<EndpointInput<K>>): RecipeExample => ({
  spec: ENDPOINTS[id],
  input,
});

/**
 * The example calls of the recipe's flow, by the name its template gives each curl line
 * (`{{curl:NAME}}`). The table says how each call is made (method, path, body or query, the
 * token); these are only the values, typed by the operation's input (recipe.test.ts also
 * parses each with the operation's schema).
 */
export const EXAMPLES = {
  open: example("open", {}),
  join: example("join", { code: CODE }),
  status: example("status", { code: CODE, wait: String(FIRST_WAIT_MS) }),
  send: example("send", { code: CODE, text: "hello from A", idempotency_key: "a-0001", ack: ["8214299"] }),
  recv: example("recv", { code: CODE, wait: String(FIRST_WAIT_MS), ack: "8214299,8214301" }),
  stream: {
    spec: STREAM_ENDPOINT,
    input: { code: CODE, format: "ndjson" } satisfies z.input<typeof StreamQuery>,
    stream: true,
  },
  ack: example("ack", { code: CODE, ids: ["8214307"] }),
  until_read: example("status", { code: CODE, wait: String(FIRST_WAIT_MS), until_read: "8214307" }),
  close: example("close", { code: CODE }),
} satisfies Record<string, RecipeExample>;

/** A body this long or longer goes on a line of its own. */
const LONG_BODY = 60;

/**
 * One example as a curl command line: the headers every room call needs, the token when the
 * call takes one, the URL one single-quoted word (shellQuote). Example values are plain (no
 * quote, no character a query would escape), so they need no escaping of their own.
 */
export function curlLine({ spec, input, stream }: RecipeExample, base: string): string {
  const plain = (value: string) => {
    if (!/^[\w .,:-]*$/.test(value)) throw new Error(`recipe example: ${value} is not plain text`);
    return value;
  };
  const query =
    spec.input?.in === "query"
      ? `?${Object.entries(input)
          .map(([name, value]) => `${name}=${plain(String(value))}`)
          .join("&")}`
      : "";
  const words = [stream ? "curl -sN" : "curl -s"];
  if (spec.method === "POST") words.push("-X POST");
  words.push(shellQuote(`${base}${spec.path}${query}`), `-H 'User-Agent: ${USER_AGENT}'`);
  const body = spec.input?.in === "body" ? JSON.stringify(input) : undefined;
  if (body !== undefined) {
    plain(body.replace(/["{}[\]]/g, ""));
    words.push("-H 'Content-Type: application/json'");
  }
  if (spec.auth === "bearer") words.push('-H "Authorization: Bearer $TOKEN"');
  if (body === undefined) return words.join(" ");
  return `${words.join(" ")}${body.length >= LONG_BODY ? " \\\n  " : " "}-d '${body}'`;
}

/** The values that are the same for every request. */
const FIXED: Record<string, string> = {
  user_agent: USER_AGENT,
  max_wait_ms: String(MAX_WAIT_MS),
  first_wait_ms: String(FIRST_WAIT_MS),
  first_wait_s: String(FIRST_WAIT_MS / 1000),
  max_ack_ids: String(MAX_ACK_IDS),
  max_text_bytes: MAX_TEXT_BYTES.toLocaleString("en"),
  max_pending_messages: String(MAX_PENDING_MESSAGES),
  max_pending_bytes: MAX_PENDING_BYTES.toLocaleString("en"),
  e2e_max_text_bytes: e2eMaxTextBytes(1).toLocaleString("en"),
  e2e_openssl_recipe: E2E_OPENSSL_RECIPE,
  // From the endpoint table: every call, the calls that take a token, the MCP tools.
  calls: callTable(),
  seat_calls: operationList("bearer"),
  tools: operationList("tools:and:code"),
  errors: (Object.keys(ERRORS) as ErrorCode[])
    .map((code) => `| ${ERRORS[code].status} | \`${code}\` | ${ERRORS[code].message} | ${ERRORS[code].remedy} |`)
    .join("\n"),
};

const PLACEHOLDER = /\{\{sh:((?:[^{}]|\{\{[a-z0-9_]+\}\})*)\}\}|\{\{([a-z0-9_]+)\}\}/g;

/**
 * Fills `template` in one pass (a value is never read as a placeholder): `{{name}}` from
 * `values`, `{{sh:path}}` as shellQuote(base + path), the path's own `{{name}}`s filled first.
 * An unknown name throws, so a template and its values cannot drift apart unseen.
 */
export function fillTemplate(template: string, values: Record<string, string>, base: string): string {
  const value = (name: string) => {
    const found = values[name];
    if (found === undefined) throw new Error(`recipe template: no value for {{${name}}}`);
    return found;
  };
  return template.replace(PLACEHOLDER, (_match, path: string | undefined, name: string | undefined) =>
    path === undefined
      ? value(name!)
      : shellQuote(base + path.replace(/\{\{([a-z0-9_]+)\}\}/g, (_m, n: string) => value(n))),
  );
}

/** The recipe for a relay at `baseUrl` (its PUBLIC_URL, else the request's). */
export function renderRecipe(baseUrl: string, settings: RecipeSettings = CONFIG_DEFAULTS): string {
  const endingKeep = settings.roomEndingKeepMs / 1000;
  const curls = Object.entries(EXAMPLES).map(([name, call]) => [`curl_${name}`, curlLine(call, baseUrl)]);
  return fillTemplate(
    TEMPLATE,
    {
      ...FIXED,
      ...Object.fromEntries(curls),
      base: baseUrl,
      idle_minutes: String(settings.roomIdleMs / 60_000),
      max_minutes: String(settings.roomMaxMs / 60_000),
      expires_in: String(settings.roomMaxMs / 1000),
      mcp_max_wait_s: String(settings.mcpMaxWaitMs / 1000),
      rooms_per_ip: settings.roomsPerClient > 0 ? String(settings.roomsPerClient) : "no limit",
      ending_keep: endingKeep % 60 === 0 ? `${endingKeep / 60} minutes` : `${endingKeep} seconds`,
    },
    baseUrl,
  );
}
