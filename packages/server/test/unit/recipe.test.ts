// The recipe (GET /v1/api) is src/http/recipe.md filled in: a snapshot of it for one base URL
// and the default configuration, every placeholder known, every URL on a shell line one
// single-quoted word, and its example calls valid requests of the endpoint table.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ENDPOINTS, type EndpointSpec, MAX_PENDING_BYTES, OPERATION_IDS } from "@duet/protocol";
import { operationList, callTable } from "@duet/protocol/endpoint-docs";
import { EXAMPLES, fillTemplate, renderRecipe } from "../../src/http/recipe";

const TEMPLATE = readFileSync(join(__dirname, "../../src/http/recipe.md"), "utf8");
const BASE = "https://relay.example";

describe("the recipe", () => {
  it("is the template filled in (snapshot; what the endpoint table renders into it left out)", () => {
    expect(withoutTableLists(renderRecipe(BASE))).toMatchSnapshot();
  });

  it("leaves no placeholder, and refuses one it has no value for", () => {
    expect(renderRecipe(BASE)).not.toMatch(/\{\{/);
    expect(() => fillTemplate("a {{nope}} b", {}, "x")).toThrow(/no value for \{\{nope\}\}/);
  });

  it("says the pending-bytes limit with MAX_PENDING_BYTES, not the text limit", () => {
    expect(TEMPLATE).toMatch(/\| Unacked text per room, both directions together \| \{\{max_pending_bytes\}\} bytes/);
    expect(renderRecipe(BASE)).toContain(
      `| Unacked text per room, both directions together | ${MAX_PENDING_BYTES.toLocaleString("en")} bytes`,
    );
  });

  it("quotes every URL of its shell lines, so that a base URL never reaches a shell as anything else", () => {
    // A base with a quote and shell syntax in it (as a PUBLIC_URL path could hold).
    const base = "https://relay.example/o'brien;id";
    const recipe = renderRecipe(base);
    const curls = recipe.split("\n").filter((line) => /^curl /.test(line));
    expect(curls.length).toBeGreaterThanOrEqual(8);
    for (const line of curls) {
      // bash reads the line's words back: the URL is one of them, whole.
      const words = execFileSync("bash", ["-c", `set -- ${line.replace(/ \\$/, "")}; printf '%s\\n' "$@"`], {
        encoding: "utf8",
        env: { PATH: process.env.PATH!, TOKEN: "t" },
        // Not a socket on stdin: Debian's bash takes a socket for an ssh session and reads ~/.bashrc.
        stdio: ["ignore", "pipe", "pipe"],
      }).split("\n");
      expect(words.some((word) => word.startsWith(`${base}/`))).toBe(true);
    }
    expect(recipe).toContain(`claude mcp add --transport http duet '${base.replace("'", "'\\''")}/mcp'`);
  });

  it("lists every call of the endpoint table, says which need the token, and names every MCP tool, from the table", () => {
    const recipe = renderRecipe(BASE);
    expect(recipe).toContain(`## The calls\n\n${callTable()}\n`);
    const specs = OPERATION_IDS.map((id) => ENDPOINTS[id] as EndpointSpec);
    const tokenLine = recipe.split("\n").find((line) => line.endsWith("need `Authorization: Bearer <token>`."))!;
    expect(tokenLine).toBe(
      `- The seat calls (${specs
        .filter((spec) => spec.auth === "bearer")
        .map((spec) => spec.operationId)
        .join(", ")}) and the stream need \`Authorization: Bearer <token>\`.`,
    );
    const mcp = recipe.slice(recipe.indexOf("## MCP"), recipe.indexOf("## Other endpoints"));
    for (const spec of specs.filter((s) => s.tool))
      expect({ tool: spec.operationId, named: mcp.includes(`\`${spec.operationId}\``) }).toEqual({
        tool: spec.operationId,
        named: true,
      });
  });
});

describe("the recipe's example calls", () => {
  it("are valid requests: each input parses with its operation's schema", () => {
    for (const [name, { spec, input }] of Object.entries(EXAMPLES)) {
      const parsed = spec.input!.schema.safeParse(input);
      expect({ name, issues: parsed.error?.issues ?? [] }).toEqual({ name, issues: [] });
    }
  });

  it("are each shown by the template", () => {
    for (const name of Object.keys(EXAMPLES)) expect(TEMPLATE).toContain(`{{curl_${name}}}`);
  });

  it("are made as the table says: method, where the input goes, the token", () => {
    const recipe = renderRecipe(BASE);
    const lines = recipe.split("\n");
    const curl = (path: string) => lines.find((line) => line.includes(`'${BASE}${path}`))!;
    expect(curl("/v1/close")).toMatch(/^curl -s -X POST .* -H "Authorization: Bearer \$TOKEN" -d '\{"code":/);
    expect(curl("/v1/recv?")).toMatch(/^curl -s '[^']*\?code=k7dq-3mxa-9z2f&wait=\d+&ack=[\d,]+' /);
    expect(curl("/v1/open")).not.toContain("Authorization");
    expect(curl("/v1/stream?")).toMatch(/^curl -sN /);
  });
});

/**
 * The recipe without the lists the endpoint table renders into it (the test above holds them),
 * so that a new entry of the table leaves the snapshot as it is.
 */
function withoutTableLists(recipe: string): string {
  return recipe
    .replace(`## The calls\n\n${callTable()}\n`, "## The calls\n\n{{calls}}\n")
    .replace(`The seat calls (${operationList("bearer")})`, "The seat calls ({{seat_calls}})")
    .replace(`${operationList("tools:and:code")}, with the same rooms`, "{{tools}}, with the same rooms");
}
