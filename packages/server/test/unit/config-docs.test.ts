// docs/configuration.md's table of environment variables is the config schema's: every
// variable, its default and its description, so the documentation cannot drift from the code
// (its generated section is compared by generated-docs.test.ts).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config";
import { generatedSections } from "@duet/protocol/endpoint-docs";
import { configReference } from "../../src/config-reference";

const DOC = join(__dirname, "../../../../docs/configuration.md");

it("every variable of the config schema has a description", () => {
  const undescribed = configReference()
    .filter((v) => v.description.trim() === "")
    .map((v) => v.name);
  expect(undescribed).toEqual([]);
});

it("the defaults in the reference are what the schema yields when a variable is unset", () => {
  const byName = new Map(configReference().map((v) => [v.name, v.defaultValue]));
  expect(byName.get("PORT")).toBe("`8080`");
  expect(byName.get("REDIS_KEY_PREFIX")).toBe("`duet:`");
  expect(byName.get("REDIS_URL")).toBe("unset");
  expect([...byName.keys()]).toEqual(Object.keys(ConfigSchema.shape));
});

it("docs/configuration.md carries the table generated from the schema (generated-docs.test.ts compares it)", () => {
  expect(generatedSections(readFileSync(DOC, "utf8"))).toContain("config");
});
