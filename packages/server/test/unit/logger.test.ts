// The logging policy (docs/metrics.md): lines are buffered and written asynchronously, and
// whatever is buffered when the process exits is written out first, also on process.exit
// and on an uncaught exception. Run against the built logger in a child process.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const LOGGER = join(__dirname, "../../dist/logger.js");

function run(ending: string): string[] {
  const script = `const l = require(${JSON.stringify(LOGGER)}).createLogger("info");
for (let i = 0; i < 50; i++) l.info({ i }, "request");
${ending}`;
  const child = spawnSync(process.execPath, ["-e", script], { encoding: "utf8" });
  return child.stdout.split("\n").filter(Boolean);
}

describe("buffered request logs", () => {
  it.each([
    ["process.exit", "process.exit(3);"],
    ["an uncaught exception", "setTimeout(() => { throw new Error('fatal'); }, 5);"],
    ["a normal end", ""],
  ])("are all written on %s", (_name, ending) => {
    const lines = run(ending);
    expect(lines).toHaveLength(50);
    expect(JSON.parse(lines[49]!)).toMatchObject({ level: "info", i: 49, msg: "request" });
  });
});
