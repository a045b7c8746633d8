// No Docker engine here, so the image is not built. This runs the Dockerfile's build
// stage commands (read from the Dockerfile) on a copy of the build context, starts the
// deploy output as the runtime stage would and runs its HEALTHCHECK.
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";

const ROOT = resolve(__dirname, "../../..");

test("the Dockerfile's build steps produce a production-only tree that starts and passes its HEALTHCHECK", () => {
  const run = spawnSync(process.execPath, [join(ROOT, "infra/scripts/emulate-image-build.mjs")], { cwd: ROOT, encoding: "utf8", timeout: 170_000 });
  const output = `${run.stdout}\n${run.stderr}`;
  if (run.status !== 0) throw new Error(`emulate-image-build failed (${run.status ?? run.signal}):\n${output.slice(-4000)}`);
  expect(output).toContain("[image] image build steps: ok");
}, 180_000);
