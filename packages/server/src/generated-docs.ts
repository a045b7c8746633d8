// Every list the repository's documents would otherwise keep by hand, rendered
// from its one source:
//
// - the endpoint tables of docs/protocol.md (§4, §4.1's rules, §11.7's MCP tools) and the lists
//   of operations in its prose, from the endpoint table (@duet/protocol's ENDPOINTS,
//   rendered by @duet/protocol/endpoint-docs);
// - the script table of docs/redis.md §3, from SCRIPTS (store/redis/scripts.ts), and its list
//   of refusals, from store/redis/lua/includes/refusals.lua;
// - the table of variables of docs/configuration.md, from the config schema (config-reference.ts).
//
// Each between the one kind of marker, `<!-- generated:NAME -->` and `<!-- /generated -->`.
//
// `pnpm docs:generate` (infra/scripts/docs-generate.mjs) writes them; `pnpm lint` and
// test/unit/generated-docs.test.ts fail while a file differs from what this renders.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { endpointSection, fillGenerated } from "@duet/protocol/endpoint-docs";
import { renderConfigTable } from "./config-reference.js";
import { scriptTable } from "./store/redis/scripts.js";

/** What a marked section renders, by name. */
export function renderSection(name: string): string | undefined {
  if (name === "redis:scripts") return scriptTable();
  if (name === "redis:refusals") return refusalList();
  if (name === "config") return renderConfigTable();
  return endpointSection(name);
}

/** The scripts' refusals, as includes/refusals.lua names them, in its order. */
function refusalList(): string {
  const lua = readFileSync(join(__dirname, "store/redis/lua/includes/refusals.lua"), "utf8");
  return [...lua.matchAll(/^local ([A-Z_]+) = -\d+/gm)].map(([, name]) => `\`${name}\``).join(", ");
}

/** The markdown files that may hold marked sections: the README, docs/, each package's README and the skill. */
function markdownFiles(root: string): string[] {
  const docs = readdirSync(join(root, "docs"))
    .filter((file) => file.endsWith(".md"))
    .map((file) => `docs/${file}`);
  const packages = readdirSync(join(root, "packages"))
    .map((name) => `packages/${name}/README.md`)
    .filter((file) => existsSync(join(root, file)));
  // The skill too: it names the MCP tools.
  const skill = "packages/client/SKILL.md";
  return ["README.md", "CONTRIBUTING.md", ...docs, ...packages, skill].filter((file) => existsSync(join(root, file)));
}

export interface GeneratedFile {
  /** Relative to the repository's root. */
  file: string;
  current: string;
  expected: string;
}

/** Every generated file of the repository at `root`: what it holds now, and what it should. */
export function generatedFiles(root: string): GeneratedFile[] {
  const files: GeneratedFile[] = [];
  for (const file of markdownFiles(root)) {
    const current = readFileSync(join(root, file), "utf8");
    const expected = fillGenerated(current, renderSection, { file });
    if (current.includes("<!-- generated:")) files.push({ file, current, expected });
  }
  return files;
}
