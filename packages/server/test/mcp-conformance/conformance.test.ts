// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) against
// /mcp on the in-process store and on Redis: every active server scenario, with the ones
// that test features duet does not have listed in expected-failures.yml (the suite's own
// baseline, which also fails when one of them starts to pass). The suite needs Node >= 22:
// jest.config.cjs collects this file only there (the pinned Node 26); run it alone with
// `pnpm --filter @duet/server test:mcp-conformance` on the pinned runtime.
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify, stripVTControlCharacters } from "node:util";
import { useTarget } from "../support/targets";

const run = promisify(execFile);
const CLI = require.resolve("@modelcontextprotocol/conformance/dist/index.js");
const BASELINE = join(__dirname, "expected-failures.yml");
const APPLIES = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"];

describe.each(["memory", "redis"] as const)("the MCP conformance suite on %s", (kind) => {
  const target = useTarget(kind, { LOG_LEVEL: "silent" });

  it("passes every server scenario that applies, and fails only those in its baseline", async () => {
    // localhost, as an MCP client on this machine names it (the suite's DNS-rebinding check
    // sends Host and Origin for it and for a foreign name).
    const url = `${target().nodes[0]!.url.replace("127.0.0.1", "localhost")}/mcp`;
    const output = mkdtempSync(join(tmpdir(), "duet-mcp-conformance-"));
    try {
      const result = await run(
        process.execPath,
        [CLI, "server", "--url", url, "--expected-failures", BASELINE, "--output-dir", output],
        { timeout: 240_000, maxBuffer: 16 * 1024 * 1024 },
      ).catch((error: { code?: number; stdout?: string; stderr?: string }) => error);
      const stdout = stripVTControlCharacters(result.stdout ?? "");
      const passed = APPLIES.filter((scenario) => new RegExp(`✓ ${scenario}: [1-9]\\d* passed, 0 failed`).test(stdout));
      console.log(`FIGURES mcp-conformance ${JSON.stringify({ kind, passed, results: readdirSync(output).length })}`);
      expect({ passed, exitCode: "code" in result ? result.code : 0 }).toEqual({ passed: APPLIES, exitCode: 0 });
    } finally {
      rmSync(output, { recursive: true, force: true });
    }
  }, 300_000);
});
