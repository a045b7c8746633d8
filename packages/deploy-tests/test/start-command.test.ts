// `pnpm start` as the README runs it (`pnpm start &`, later `kill <that PID>`): the signal
// must reach the relay, not only pnpm. The relay binds port 0 and reports its address.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { portAccepts } from "./support/topology";

const ROOT = resolve(__dirname, "../../..");

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The pids of a process's children (Linux /proc). */
const childrenOf = (pid: number): number[] =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
};

const started: { pnpm: ChildProcess; relayPid?: number }[] = [];

afterEach(() => {
  // Only if a test failed half-way: nothing it started may outlive the file (pnpm runs in
  // its own process group, so a relay left behind by pnpm is still found there).
  for (const { pnpm, relayPid } of started.splice(0)) {
    if (relayPid && alive(relayPid)) process.kill(relayPid, "SIGKILL");
    try {
      process.kill(-pnpm.pid!, "SIGKILL");
    } catch {
      /* the group is gone already */
    }
  }
});

/** `pnpm start` on port 0 until the relay listens; resolves with pnpm, the relay's pid and port. */
async function startPnpm() {
  const { REDIS_URL: _r, REDIS_CLUSTER_NODES: _c, ...env } = process.env;
  // A user's shell: no node_modules/.bin on PATH (the tests run under pnpm, which puts the
  // pinned runtime's `node` there: pnpm itself would then run under a shell shim).
  const PATH = (env.PATH ?? "")
    .split(":")
    .filter((dir) => !dir.split("/").includes("node_modules"))
    .join(":");
  const pnpm = spawn("pnpm", ["start"], {
    cwd: ROOT,
    // Port 0 for the metrics listener too: 9464 may be another relay's on this machine.
    env: { ...env, PATH, PORT: "0", METRICS_PORT: "0", HOST: "127.0.0.1", SHUTDOWN_DRAIN_SECONDS: "1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group: a terminal's Ctrl-C signals the group, `kill PID` only pnpm
  });
  const entry: { pnpm: ChildProcess; relayPid?: number } = { pnpm };
  started.push(entry);
  const exited = new Promise<number | null>((r) => pnpm.once("exit", (code) => r(code)));
  let output = "";
  pnpm.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const url = await new Promise<URL>((resolveUrl, reject) => {
    pnpm.stdout!.on("data", (d: Buffer) => {
      output += d.toString();
      const line = output.split("\n").find((l) => l.includes('"msg":"listening"'));
      if (line) resolveUrl(new URL(JSON.parse(line).url));
    });
    void exited.then((code) => reject(new Error(`pnpm start exited (${code}) before the relay listened:\n${output}`)));
    // A guard, not a measure: what pnpm printed, rather than the test's own timeout.
    setTimeout(() => reject(new Error(`pnpm start: no relay listening after 90 s:\n${output}`)), 90_000).unref();
  });
  // pnpm's child is the relay itself (the script's shell exec'd node), not a shell.
  const relays = childrenOf(pnpm.pid!).filter((pid) => cmdline(pid).includes("packages/server/dist/main.js"));
  expect(relays).toHaveLength(1);
  entry.relayPid = relays[0]!;
  // On the pinned runtime (the root devDependency `node`), whatever Node runs pnpm.
  const pinned = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")).devDependencies.node as string;
  const runtime = readFileSync(`/proc/${relays[0]}/cmdline`, "utf8").split("\0")[0]!;
  expect(execFileSync(runtime, ["--version"], { encoding: "utf8" }).trim()).toBe(`v${pinned}`);
  const port = Number(url.port);
  expect(await portAccepts(port)).toBe(true);
  return { pnpm, relayPid: relays[0]!, port, exited, output: () => output };
}

async function expectRelayGone(run: Awaited<ReturnType<typeof startPnpm>>) {
  await run.exited;
  for (const deadline = Date.now() + 10_000; alive(run.relayPid) && Date.now() < deadline; )
    await new Promise((r) => setTimeout(r, 100));
  expect({ relayAlive: alive(run.relayPid), portAccepts: await portAccepts(run.port) }).toEqual({
    relayAlive: false,
    portAccepts: false,
  });
  expect(run.output()).toContain('"msg":"stopped"'); // it drained and shut down, not killed
}

test("kill of the PID of `pnpm start` stops the relay itself (no node left on its port)", async () => {
  const run = await startPnpm();
  run.pnpm.kill("SIGTERM");
  await expectRelayGone(run);
}, 120_000);

test("Ctrl-C (SIGINT to the process group) stops the relay after its drain", async () => {
  const run = await startPnpm();
  process.kill(-run.pnpm.pid!, "SIGINT");
  await expectRelayGone(run);
}, 120_000);
