// The one-file CLI as an agent on another machine gets it: downloaded from the relay it was
// invited to, into a directory with no node_modules, and run with plain node. Two such
// agents hold a whole conversation through the built relay. And `pnpm install-cli`, which
// puts the same file on PATH from a checkout.
import { execFile } from "node:child_process";
import { builtinModules } from "node:module";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ROOT, startRelay, type RelayProcess } from "../support/processes";

const run = promisify(execFile);

// Each step starts a Node process: seconds when test runs share two cores (one CI run under
// a load average of 20 took the conversation past 30 s). The timeout only guards a hang.
jest.setTimeout(180_000);

describe("the CLI bundle served by the relay", () => {
  let relay: RelayProcess;
  let workDir: string;

  beforeAll(async () => {
    relay = await startRelay();
    workDir = mkdtempSync(join(tmpdir(), "duet-bundle-"));
  });
  afterAll(async () => {
    await relay.stop();
    rmSync(workDir, { recursive: true, force: true });
  });

  /** A machine of its own: a working directory and a state directory, nothing installed. */
  const machine = (name: string) => {
    const dir = join(workDir, name);
    const env = { PATH: process.env.PATH!, HOME: dir, DUET_STATE_DIR: join(dir, "state") };
    const duet = async (args: string[]) => {
      try {
        const { stdout, stderr } = await run(process.execPath, ["duet.cjs", ...args], { cwd: dir, env });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const failed = error as { code: number; stdout: string; stderr: string };
        return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
      }
    };
    /** Downloads what `url` serves into the machine's directory, as curl -fsSO would. */
    const download = async (url: string) => {
      const reply = await fetch(url, { headers: { "user-agent": "curl/8.5.0" } });
      expect(reply.status).toBe(200);
      const name = new URL(url).pathname.split("/").pop()!;
      writeFileSync(join(dir, name), Buffer.from(await reply.arrayBuffer()));
      return reply;
    };
    mkdirSync(dir);
    return { dir, duet, download };
  };

  it("is one file that requires only Node's own modules, served as JavaScript with caching headers", async () => {
    const reply = await fetch(`${relay.url}/v1/cli/duet.cjs`, { headers: { "user-agent": "curl/8.5.0" } });
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(reply.headers.get("cache-control")).toMatch(/max-age=\d+/);
    const source = await reply.text();
    expect(source.startsWith("#!/usr/bin/env node\n")).toBe(true);
    const required = new Set([...source.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1]!));
    const builtins = new Set([...builtinModules, ...builtinModules.map((name) => `node:${name}`)]);
    expect([...required].filter((name) => !builtins.has(name))).toEqual([]);
    expect(reply.headers.get("etag")).toMatch(/^"[\w-]+"$/);
  });

  it("serves the skill, the same text as packages/client/SKILL.md", async () => {
    const reply = await fetch(`${relay.url}/v1/skill.md`, { headers: { "user-agent": "curl/8.5.0" } });
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toBe("text/markdown; charset=utf-8");
    expect(await reply.text()).toBe(readFileSync(join(ROOT, "packages/client/SKILL.md"), "utf8"));
  });

  it("two agents with only the downloaded file open, join with the share block's line, talk and close", async () => {
    const alice = machine("alice");
    const bob = machine("bob");
    await alice.download(`${relay.url}/v1/cli/duet.cjs`);
    const opened = await alice.duet(["--base-url", relay.url, "--json", "open"]);
    expect(opened).toMatchObject({ code: 0 });
    const { code, share } = JSON.parse(opened.stdout) as { code: string; share: string };

    // Bob follows the share block's one line: fetch the CLI from the relay, join with node.
    const line = share.split("\n").find((text) => text.includes("curl -fsSO"));
    // Each URL of the line is single-quoted (docs/protocol.md §5.1).
    const command = /curl -fsSO '([^']+)' && node duet\.cjs join '([^']+)'$/.exec(line ?? "");
    expect(command).not.toBeNull();
    await bob.download(command![1]!);
    expect(existsSync(join(bob.dir, "node_modules"))).toBe(false);
    const joined = await bob.duet(["join", command![2]!]);
    expect(joined).toMatchObject({ code: 0, stdout: expect.stringContaining(`Joined room ${code} as seat b`) });

    expect(await bob.duet(["send", "hello from a downloaded CLI"])).toMatchObject({ code: 0 });
    expect(await alice.duet(["watch", "--count", "1", "--timeout", "20000"])).toMatchObject({
      code: 0,
      stdout: "b: hello from a downloaded CLI\n",
    });
    expect(await alice.duet(["send", "bye"])).toMatchObject({ code: 0 });
    expect(await bob.duet(["--json", "recv", "--ack"])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('"text":"bye"'),
    });
    expect(await alice.duet(["close"])).toMatchObject({ code: 0 });
    expect(JSON.parse((await bob.duet(["--json", "--base-url", relay.url, "stats"])).stdout)).toMatchObject({
      paired: expect.any(Number),
    });
  });

  it("pnpm install-cli puts duet on PATH for a non-interactive shell, and --json output is clean JSON", async () => {
    const rootScripts = (
      JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }
    ).scripts;
    expect(rootScripts["install-cli"]).toMatch(/ && node packages\/client\/scripts\/install-cli\.mjs$/);
    // The build half of the script has run (global setup); run the install half into a
    // prefix of our own instead of the machine's global one.
    const home = join(workDir, "installer");
    const prefix = join(home, "prefix");
    mkdirSync(home);
    const env = { PATH: process.env.PATH!, HOME: home, npm_config_prefix: prefix };
    const installed = await run(process.execPath, [join(ROOT, "packages/client/scripts/install-cli.mjs")], {
      cwd: home,
      env,
    });
    expect(installed.stdout).toContain(`Installed duet as ${join(prefix, "bin", "duet")}`);

    const shell = (command: string) =>
      run("bash", ["-c", command], {
        cwd: home,
        env: { PATH: `${join(prefix, "bin")}:${process.env.PATH}`, HOME: home, DUET_STATE_DIR: join(home, "state") },
      });
    expect((await shell("duet --version")).stdout).toBe("0.1.0\n");
    const stats = await shell(`duet --json --base-url ${relay.url} stats`);
    expect(JSON.parse(stats.stdout)).toEqual(
      expect.objectContaining({ sessions: expect.any(Number), rooms_open: expect.any(Number) }),
    );
    expect(stats.stderr).toBe("");
  });
});
