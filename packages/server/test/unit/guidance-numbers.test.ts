// The numbers the served guidance states are the code's: every default an MCP tool argument
// names is the one the relay applies, every hold, cap and keep-alive in the tools, the MCP
// instructions, the recipe and the skill is the configuration's default or the protocol's
// limit, and every wait the recipe puts in an example is one it explains. And the guidance
// links nothing the relay does not serve.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { FIRST_WAIT_MS, MAX_ACK_IDS, MAX_WAIT_MS, MCP_KEEPALIVE_MS } from "@duet/protocol";
import { loadConfig } from "../../src/config";
import { heldWaitMs, MCP_INSTRUCTIONS, MCP_TOOLS, type ToolEntry } from "../../src/http/mcp-tools";
import { renderRecipe } from "../../src/http/recipe";

const config = loadConfig({});
const recipe = renderRecipe("https://relay.example", config);

/** The skill the relay serves (GET /v1/skill.md). */
const skill = readFileSync(join(__dirname, "../../../client/SKILL.md"), "utf8");

type Properties = Record<string, { description?: string }>;
const argumentsOf = (entry: ToolEntry) =>
  Object.entries((entry.tool.inputSchema.properties ?? {}) as Properties).map(([name, schema]) => ({
    name,
    description: schema.description ?? "",
  }));

/** Every text an MCP client reads: the instructions, each tool's description, each argument's. */
const mcpTexts: { where: string; text: string }[] = [
  { where: "instructions", text: MCP_INSTRUCTIONS },
  ...MCP_TOOLS.flatMap((entry) => [
    { where: entry.id, text: entry.tool.description ?? "" },
    ...argumentsOf(entry).map((arg) => ({ where: `${entry.id}.${arg.name}`, text: arg.description })),
  ]),
];

const numbers = (text: string, pattern: RegExp) =>
  [...text.matchAll(pattern)].map((match) => Number(match[1]!.replace(/,/g, "")));

/**
 * What the relay applies when an argument is left out, per tool: a waiting room tool's wait
 * is what mcp.ts holds (heldWaitMs, with the configuration's default MCP_MAX_WAIT_MS); the
 * self-test's probe is held MAX_WAIT_MS (selftest.ts).
 */
function appliedDefault(entry: ToolEntry, argument: string): number | undefined {
  if (argument !== "wait") return undefined;
  if (entry.holds) return heldWaitMs(entry, undefined, config.mcpMaxWaitMs);
  if (entry.id === "selftest") return MAX_WAIT_MS;
  return undefined;
}

describe("the numbers in the guidance", () => {
  it("every default an MCP tool argument states is the one the relay applies when it is left out", () => {
    const stated: string[] = [];
    for (const entry of MCP_TOOLS) {
      for (const arg of argumentsOf(entry)) {
        for (const value of numbers(arg.description, /default (\d[\d,]*)/g)) {
          stated.push(`${entry.id}.${arg.name}`);
          expect({ argument: `${entry.id}.${arg.name}`, stated: value }).toEqual({
            argument: `${entry.id}.${arg.name}`,
            stated: appliedDefault(entry, arg.name),
          });
        }
      }
    }
    // The ids an ack may list, wherever an argument takes them.
    for (const entry of MCP_TOOLS)
      for (const arg of argumentsOf(entry).filter((a) => a.name === "ack"))
        expect({ argument: `${entry.id}.ack`, most: numbers(arg.description, /at most (\d+)/g) }).toEqual({
          argument: `${entry.id}.ack`,
          most: [MAX_ACK_IDS],
        });
    // The recv tool's wait says its default: the relay's MCP hold, not REST's MAX_WAIT_MS.
    expect(stated).toContain("recv.wait");
    expect(heldWaitMs({ id: "recv" }, undefined, config.mcpMaxWaitMs)).toBe(config.mcpMaxWaitMs);
  });

  it("every hold and keep-alive the MCP texts and the recipe state is the configuration's default", () => {
    const texts = [...mcpTexts, { where: "recipe", text: recipe }, { where: "skill", text: skill }];
    let holds = 0;
    for (const { where, text } of texts) {
      for (const seconds of numbers(text, /at most (\d+) s\b/g)) {
        holds++;
        expect({ where, seconds }).toEqual({ where, seconds: config.mcpMaxWaitMs / 1000 });
      }
      for (const ms of numbers(text, /at most (\d[\d,]*) ms\b/g)) {
        holds++;
        expect({ where, ms }).toEqual({ where, ms: config.mcpMaxWaitMs });
      }
      for (const seconds of numbers(text, /keep-alive bytes every (\d+) s\b/g))
        expect({ where, seconds }).toEqual({ where, seconds: MCP_KEEPALIVE_MS / 1000 });
    }
    expect(holds).toBeGreaterThanOrEqual(4);
  });

  it("the recipe's waits: examples use the first wait or the longest, which it explains; the first wait is below a 10 s cut", () => {
    expect(FIRST_WAIT_MS).toBeLessThan(10_000);
    expect(FIRST_WAIT_MS).toBeLessThanOrEqual(config.mcpMaxWaitMs);
    const waits = numbers(recipe, /wait=(\d+)/g);
    expect(waits.length).toBeGreaterThanOrEqual(4);
    // 0 answers at once; the rest are the two the recipe explains.
    for (const wait of waits) expect([0, FIRST_WAIT_MS, MAX_WAIT_MS]).toContain(wait);
    expect(recipe).toContain(`Start with \`wait=${FIRST_WAIT_MS}\``);
    for (const value of numbers(recipe, /default (\d[\d,]*)/g)) expect([0, MAX_WAIT_MS]).toContain(value);
    // The ids an ack may list.
    const ackIds = numbers(recipe, /ids, at most\s+(\d+)/g);
    expect(ackIds.length).toBeGreaterThan(0);
    for (const ids of ackIds) expect(ids).toBe(MAX_ACK_IDS);
  });

  it("the skill's waits are the first wait (or none)", () => {
    const waits = numbers(skill, /--wait (\d+)/g);
    expect(waits).toContain(FIRST_WAIT_MS);
    for (const wait of waits) expect([0, FIRST_WAIT_MS]).toContain(wait);
    expect(skill).toContain(`Start with \`--wait ${FIRST_WAIT_MS}\` (${FIRST_WAIT_MS / 1000} s)`);
  });

  it("the served guidance points to nothing the relay does not serve (no repository docs/ paths)", () => {
    for (const { where, text } of [...mcpTexts, { where: "recipe", text: recipe }, { where: "skill", text: skill }])
      expect({ where, docs: text.match(/\bdocs\/[\w-]+\.md/g) }).toEqual({ where, docs: null });
  });

  it("a proxy's 502 and 504 are named in the recipe's error guidance, with what to do", () => {
    const errors = recipe.slice(recipe.indexOf("## Errors"), recipe.indexOf("## MCP"));
    expect(errors).toMatch(/502 or 504/);
    expect(errors).toMatch(/shorter `wait`/);
    expect(errors).toMatch(/nothing is lost/);
  });
});
