// The configuration reference, read from the config schema itself: every variable, its
// default (what the schema yields when the variable is unset) and its .describe() text.
// docs/configuration.md carries the table this renders; a test fails when they differ, and
// `pnpm docs:config` rewrites it.
import { ConfigSchema } from "./config.js";

export interface ConfigVariableReference {
  name: string;
  /** As shown in the docs: `8080`, `duet:`, or "unset". */
  defaultValue: string;
  description: string;
}

/** Marks the generated table in docs/configuration.md. */
export const CONFIG_TABLE_START =
  "<!-- config-table:start (generated from packages/server/src/config.ts by `pnpm docs:config`; do not edit) -->";
export const CONFIG_TABLE_END = "<!-- config-table:end -->";

function showDefault(schema: { safeParse(input: unknown): { success: boolean; data?: unknown } }): string {
  const parsed = schema.safeParse(undefined);
  if (!parsed.success) return "required";
  const value = parsed.data;
  if (value === undefined) return "unset";
  if (Array.isArray(value) || (typeof value === "object" && value !== null)) return `\`${JSON.stringify(value)}\``;
  return `\`${String(value)}\``;
}

/** One row per environment variable, in the schema's order. */
export function configReference(): ConfigVariableReference[] {
  return Object.entries(ConfigSchema.shape).map(([name, schema]) => ({
    name,
    defaultValue: showDefault(schema),
    description: schema.description ?? "",
  }));
}

/** The markdown table, between its markers. */
export function renderConfigTable(): string {
  const cell = (text: string) => text.replace(/\|/g, "\\|").replace(/\n/g, " ");
  const rows = configReference().map((v) => `| \`${v.name}\` | ${cell(v.defaultValue)} | ${cell(v.description)} |`);
  return [
    CONFIG_TABLE_START,
    "",
    "| Variable | Default | Meaning |",
    "|---|---|---|",
    ...rows,
    "",
    CONFIG_TABLE_END,
  ].join("\n");
}

/**
 * The document with its table replaced by the current one. Throws when the markers are
 * missing, so that a table cannot silently stop being checked.
 */
export function withConfigTable(document: string): string {
  const start = document.indexOf(CONFIG_TABLE_START);
  const end = document.indexOf(CONFIG_TABLE_END);
  if (start < 0 || end < start) throw new Error("docs/configuration.md: the config-table markers are missing");
  return document.slice(0, start) + renderConfigTable() + document.slice(end + CONFIG_TABLE_END.length);
}
