// The recipe served at GET /v1/api: the whole protocol for an agent that has never seen
// duet, with examples that can be pasted as they are. The text is recipe.md beside this file,
// a markdown template: `{{name}}` is a value below, and `{{sh:/path}}` the relay's base URL
// and that path as one single-quoted shell word (the base comes from the request's Host when
// PUBLIC_URL is unset: quoted, nothing in it can reach a shell as anything but a URL).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  E2E_OPENSSL_RECIPE,
  ERRORS,
  e2eMaxTextBytes,
  MAX_PENDING_BYTES,
  MAX_PENDING_MESSAGES,
  MAX_TEXT_BYTES,
  FIRST_WAIT_MS,
  MAX_ACK_IDS,
  MAX_WAIT_MS,
  MCP_MAX_WAIT_MS,
  USER_AGENT,
  type ErrorCode,
} from "@duet/protocol";
import { operationList, callTable } from "@duet/protocol/endpoint-docs";
import { shellQuote } from "./shell.js";

export interface RecipeSettings {
  baseUrl: string;
  idleMinutes: number;
  maxMinutes: number;
  /** How long the reason a room ended stays readable to its seats. Default 600. */
  endingKeepSeconds?: number;
  /** Live rooms one address may hold (ROOMS_PER_IP); 0: no limit. Default 50. */
  roomsPerClient?: number;
  /** The longest a waiting MCP tool call holds its answer (MCP_MAX_WAIT_MS). Default the protocol's. */
  mcpMaxWaitMs?: number;
}

const TEMPLATE = readFileSync(join(__dirname, "recipe.md"), "utf8");

/** The values that are the same for every request. */
const FIXED: Record<string, string> = {
  user_agent: USER_AGENT,
  json_headers: `-H 'User-Agent: ${USER_AGENT}' -H 'Content-Type: application/json'`,
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

export function renderRecipe({
  baseUrl,
  idleMinutes,
  maxMinutes,
  endingKeepSeconds = 600,
  roomsPerClient = 50,
  mcpMaxWaitMs = MCP_MAX_WAIT_MS,
}: RecipeSettings): string {
  return fillTemplate(
    TEMPLATE,
    {
      ...FIXED,
      base: baseUrl,
      idle_minutes: String(idleMinutes),
      max_minutes: String(maxMinutes),
      expires_in: String(maxMinutes * 60),
      mcp_max_wait_s: String(mcpMaxWaitMs / 1000),
      rooms_per_ip: roomsPerClient > 0 ? String(roomsPerClient) : "no limit",
      ending_keep: endingKeepSeconds % 60 === 0 ? `${endingKeepSeconds / 60} minutes` : `${endingKeepSeconds} seconds`,
    },
    baseUrl,
  );
}
