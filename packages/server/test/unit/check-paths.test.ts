// infra/scripts/check-paths.mjs (part of `pnpm lint`), run on a small repository of its own:
// it reports a comment's or a document's path that exists nowhere, with file:line, and
// lets an existing path, a URL and a working link pass.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

const SCRIPT = resolve(__dirname, "../../../../infra/scripts/check-paths.mjs");
let repo: string;

function write(files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), text);
  }
}

function check(): { status: number | null; failures: string[]; stdout: string } {
  execFileSync("git", ["add", "--all"], { cwd: repo }); // the script reads tracked files
  const run = spawnSync(process.execPath, [SCRIPT, repo], { encoding: "utf8" });
  const failures = run.stderr.split("\n").filter((line) => line.startsWith("FAIL "));
  return { status: run.status, failures, stdout: run.stdout };
}

beforeEach(() => {
  repo = mkdtempSync(join(tmpdir(), "duet-check-paths-"));
  execFileSync("git", ["init", "-q"], { cwd: repo });
  write({
    "packages/server/src/store/redis/redis-store.ts": "export class RedisBackend {}\n",
    "packages/server/src/store/redis/lua/claim-1.lua": "-- claim: scripted-store.ts runs this\nreturn 0\n",
    "packages/server/src/store/scripted-store.ts": 'const script = "duetClaim"; // claim-1.lua\n',
  });
});

afterEach(() => rmSync(repo, { recursive: true, force: true }));

it("reports a path that exists nowhere, with its file and line", () => {
  write({
    "packages/server/src/store/script-backend.ts":
      "// The room scripts.\n// Redis runs them with EVALSHA (redis/redis-backend.ts).\nexport {};\n",
    "docs/redis.md": "# Redis\n\nThe scripts are in `packages/server/src/store/redis/scripts.ts`.\n",
  });
  const { status, failures } = check();
  expect(failures).toEqual([
    "FAIL docs/redis.md:3: packages/server/src/store/redis/scripts.ts does not exist",
    "FAIL packages/server/src/store/script-backend.ts:2: redis/redis-backend.ts does not exist",
  ]);
  expect(status).toBe(1);
});

it("passes paths that exist: relative to the file, to the package's src, to the root, and links", () => {
  write({
    "packages/server/src/store/script-backend.ts":
      "// Redis runs them with EVALSHA (redis/redis-store.ts), the scripts in lua/claim-1.lua,\n" +
      "// one store (scripted-store.ts, store/scripted-store.ts); see docs/redis.md.\nexport {};\n",
    "docs/redis.md":
      "# Redis\n\n[The store](../packages/server/src/store/redis/redis-store.ts#L1), `store/redis/lua/claim-1.lua`.\n",
  });
  const { status, failures, stdout } = check();
  expect(failures).toEqual([]);
  expect(status).toBe(0);
  expect(stdout).toContain("ok   paths:");
});

it("ignores URLs, but not a relative link to a missing file", () => {
  write({
    "packages/server/src/store/script-backend.ts":
      "// Like https://github.com/redis/ioredis/blob/main/lib/Redis.ts and example.com/a/b.md.\nexport {};\n",
    "docs/redis.md":
      "# Redis\n\n[ioredis](https://github.com/redis/ioredis/tree/main/lib/cluster/index.ts), " +
      "[gone](operators.md#sentinel).\n",
  });
  const { status, failures } = check();
  expect(failures).toEqual(["FAIL docs/redis.md:3: link operators.md#sentinel does not exist"]);
  expect(status).toBe(1);
});

it("reports a script crediting a caller that never names it", () => {
  write({ "packages/server/src/store/redis/lua/claim-1.lua": "-- claim: redis-store.ts runs this\nreturn 0\n" });
  expect(check().failures).toEqual([
    "FAIL packages/server/src/store/redis/lua/claim-1.lua:1: redis-store.ts runs this: " +
      "packages/server/src/store/redis/redis-store.ts never names claim-1.lua",
  ]);
});
