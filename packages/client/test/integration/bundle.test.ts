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
import { get } from "node:http";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { ROOT, startRelay, type RelayProcess } from "../support/processes";

const run = promisify(execFile);

// Each step starts a Node process, and the test waits for each to finish: the timeout only
// guards a hang, it measures nothing.
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
    const duet = async (args: string[], extraEnv: Record<string, string> = {}) => {
      try {
        const { stdout, stderr } = await run(process.execPath, ["duet.cjs", ...args], {
          cwd: dir,
          env: { ...env, ...extraEnv },
        });
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

  it("is minified to at most 400 KB, and served gzip (at most 150 KB) or br when Accept-Encoding asks", async () => {
    /** The bytes on the wire, as sent (fetch would decompress them). */
    const raw = (acceptEncoding?: string) =>
      new Promise<{ body: Buffer; headers: import("node:http").IncomingHttpHeaders }>((resolve, reject) => {
        const headers: Record<string, string> = { "user-agent": "curl/8.5.0" };
        if (acceptEncoding !== undefined) headers["accept-encoding"] = acceptEncoding;
        get(`${relay.url}/v1/cli/duet.cjs`, { headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => resolve({ body: Buffer.concat(chunks), headers: res.headers }));
        }).on("error", reject);
      });
    const plain = await raw();
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.headers.vary).toMatch(/Accept-Encoding/i);
    expect(plain.body.length).toBeLessThanOrEqual(400 * 1024);
    const gzipped = await raw("gzip, deflate");
    expect(gzipped.headers["content-encoding"]).toBe("gzip");
    expect(gzipped.body.length).toBeLessThanOrEqual(150 * 1024);
    expect(gunzipSync(gzipped.body).equals(plain.body)).toBe(true);
    const brotli = await raw("gzip;q=0.5, br");
    expect(brotli.headers["content-encoding"]).toBe("br");
    expect(brotliDecompressSync(brotli.body).equals(plain.body)).toBe(true);
    // Each encoding its own ETag; one the client does not offer is never sent.
    expect(new Set([plain, gzipped, brotli].map((reply) => reply.headers.etag)).size).toBe(3);
    expect((await raw("zstd, identity")).headers["content-encoding"]).toBeUndefined();
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

  it("the downloaded CLI defaults to the relay it came from; DUET_URL and --base-url still choose another", async () => {
    const carol = machine("carol");
    await carol.download(`${relay.url}/v1/cli/duet.cjs`);
    // No DUET_URL, no --base-url: the relay that served the file.
    const opened = await carol.duet(["--json", "open"]);
    expect(opened).toMatchObject({ code: 0 });
    expect(JSON.parse(opened.stdout).join_url.startsWith(`${relay.url}/join/`)).toBe(true);
    expect((await carol.duet(["--help"])).stdout).toContain(`${relay.url}, the relay this file came from`);
    // DUET_URL wins over it (here an address where nothing listens: exit 3, network; open
    // is not retried after a network error) ...
    const elsewhere = await carol.duet(["--json", "open"], { DUET_URL: "http://127.0.0.1:9" });
    expect(elsewhere.code).toBe(3);
    expect(elsewhere.stderr).toContain("http://127.0.0.1:9");
    // ... and --base-url over both.
    expect(
      await carol.duet(["--json", "--base-url", relay.url, "stats"], { DUET_URL: "http://127.0.0.1:9" }),
    ).toMatchObject({ code: 0 });
    expect(await carol.duet(["close"])).toMatchObject({ code: 0 });
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
    // Not downloaded from a relay: no relay of its own, the usual default.
    expect((await shell("duet --help")).stdout).toContain(
      "DUET_URL        relay base URL (default http://127.0.0.1:8080)",
    );
    const stats = await shell(`duet --json --base-url ${relay.url} stats`);
    expect(JSON.parse(stats.stdout)).toEqual(
      expect.objectContaining({ sessions: expect.any(Number), rooms_open: expect.any(Number) }),
    );
    expect(stats.stderr).toBe("");
  });
});
