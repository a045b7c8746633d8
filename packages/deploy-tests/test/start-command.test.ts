// `pnpm start` as the README runs it (`pnpm start &`, later `kill <that PID>`): the signal
// must reach the relay, not only pnpm. The relay binds port 0 and reports its address.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { resolve } from "node:path";

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

function portAccepts(port: number): Promise<boolean> {
  return new Promise((r) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), r(true)));
    s.once("error", () => r(false));
  });
}

let pnpm: ChildProcess | undefined;
let relayPid: number | undefined;

afterAll(() => {
  // Only if the test failed half-way: nothing it started may outlive the file (pnpm runs in
  // its own process group, so a relay left behind by pnpm is still found there).
  if (relayPid && alive(relayPid)) process.kill(relayPid, "SIGKILL");
  try {
    process.kill(-pnpm!.pid!, "SIGKILL");
  } catch {
    /* the group is gone already */
  }
});

test("kill of the PID of `pnpm start` stops the relay itself (no node left on its port)", async () => {
  const { REDIS_URL: _r, REDIS_CLUSTER_NODES: _c, ...env } = process.env;
  pnpm = spawn("pnpm", ["start"], {
    cwd: ROOT,
    env: { ...env, PORT: "0", HOST: "127.0.0.1", SHUTDOWN_DRAIN_SECONDS: "1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group, for the clean-up above; the test signals only pnpm's PID
  });
  const pnpmExit = new Promise<number | null>((r) => pnpm!.once("exit", (code) => r(code)));
  let output = "";
  pnpm.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const url = await new Promise<URL>((resolveUrl, reject) => {
    pnpm!.stdout!.on("data", (d: Buffer) => {
      output += d.toString();
      const line = output.split("\n").find((l) => l.includes('"msg":"listening"'));
      if (line) resolveUrl(new URL(JSON.parse(line).url));
    });
    void pnpmExit.then((code) => reject(new Error(`pnpm start exited (${code}) before the relay listened:\n${output}`)));
  });
  const port = Number(url.port);
  // pnpm's child is the relay itself (the script's shell exec'd node), not a shell.
  const relays = childrenOf(pnpm.pid!).filter((pid) => cmdline(pid).includes("packages/server/dist/main.js"));
  expect(relays).toHaveLength(1);
  relayPid = relays[0]!;
  expect(await portAccepts(port)).toBe(true);

  pnpm.kill("SIGTERM");
  await pnpmExit;
  for (const deadline = Date.now() + 10_000; alive(relayPid) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 100));
  expect({ relayAlive: alive(relayPid), portAccepts: await portAccepts(port) }).toEqual({ relayAlive: false, portAccepts: false });
  expect(output).toContain('"msg":"stopped"'); // it shut down cleanly, not killed
}, 120_000);
