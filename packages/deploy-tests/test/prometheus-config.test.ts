// The Prometheus configurations under infra/prometheus pass `promtool check config`: the part
// of infra/scripts/check-prometheus.mjs that needs Debian's prometheus package (its
// --promtool mode), which `pnpm test` installs first (infra/scripts/test-prerequisites.mjs).
// `pnpm lint:infra` runs the rest of that script, which needs nothing installed.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(__dirname, "../../..");
const CONFIGS = readdirSync(join(ROOT, "infra/prometheus")).filter((file) => /\.ya?ml$/.test(file));

it("every configuration under infra/prometheus passes promtool check config", () => {
  const run = spawnSync(process.execPath, [join(ROOT, "infra/scripts/check-prometheus.mjs"), "--promtool"], {
    encoding: "utf8",
  });
  expect(run.stderr).toBe("");
  expect(run.status).toBe(0);
  expect(CONFIGS.length).toBeGreaterThan(0);
  for (const file of CONFIGS) expect(run.stdout).toContain(`ok   infra/prometheus/${file}: promtool check config`);
});
