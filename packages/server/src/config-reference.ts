// The configuration reference, read from the config schema itself: every variable, its
// default (what the schema yields when the variable is unset) and its .describe() text.
// docs/configuration.md carries the table this renders (generated-docs.ts); a test fails when
// they differ, and `pnpm docs:generate` rewrites it.
import { ConfigSchema } from "./config.js";

export interface ConfigVariableReference {
  name: string;
  /** As shown in the docs: `8080`, `duet:`, or "unset". */
  defaultValue: string;
  description: string;
}

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

/** docs/configuration.md's table of variables (its `<!-- generated:config -->` section). */
export function renderConfigTable(): string {
  const cell = (text: string) => text.replace(/\|/g, "\\|").replace(/\n/g, " ");
  const rows = configReference().map((v) => `| \`${v.name}\` | ${cell(v.defaultValue)} | ${cell(v.description)} |`);
  return ["| Variable | Default | Meaning |", "|---|---|---|", ...rows].join("\n");
}
