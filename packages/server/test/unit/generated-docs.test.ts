// Every generated list of the repository (src/generated-docs.ts: the documents' endpoint
// tables and lists of operations, docs/redis.md's script table and refusals,
// docs/configuration.md's variables) is what its source renders. `pnpm docs:generate`
// rewrites them; `pnpm lint` runs the same check.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedFiles } from "../../src/generated-docs";

const ROOT = join(__dirname, "../../../..");

const files = generatedFiles(ROOT);

it("finds the generated files: protocol.md's endpoint tables, redis.md's scripts and the variables", () => {
  expect(files.map(({ file }) => file)).toEqual(
    expect.arrayContaining(["docs/protocol.md", "docs/redis.md", "docs/configuration.md"]),
  );
});

it.each(files.map(({ file }) => file))("%s is what its source renders (run `pnpm docs:generate`)", (file) => {
  const { current, expected } = files.find((f) => f.file === file)!;
  // Compared line by line, so a failure names the line that differs.
  expect(current.split("\n")).toEqual(expected.split("\n"));
});

it("docs/redis.md's list of refusals is generated and names every refusal of refusals.lua", () => {
  const lua = readFileSync(join(ROOT, "packages/server/src/store/redis/lua/includes/refusals.lua"), "utf8");
  const names = [...lua.matchAll(/^local ([A-Z_]+) = -\d+/gm)].map(([, name]) => name!);
  const section = /<!-- generated:redis:refusals -->(.*?)<!-- \/generated -->/.exec(
    readFileSync(join(ROOT, "docs/redis.md"), "utf8"),
  )?.[1];
  expect(names).toContain("TOO_MANY_ROOMS");
  expect(section?.match(/[A-Z_]{3,}/g)).toEqual(names);
});
