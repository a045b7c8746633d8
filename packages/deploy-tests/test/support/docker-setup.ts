// A Docker engine, Compose v2 and the base-image stand-ins for compose.test.ts: installed,
// started or built only when missing, each said in one line (docker/docker-env.sh).
//
// The global setup only starts `docker-env.sh ensure` (on a fresh machine: an install, a
// debootstrap and four image builds, about two minutes, mostly waiting on the network and
// the disk); the files that need no Docker (topology, `pnpm start`, Prometheus) run
// meanwhile, and compose.test.ts, which the sequencer puts last, waits for it (dockerReady).
// A caller that started it already (CI) names its log and status file in
// DUET_DOCKER_ENSURE_LOG and DUET_DOCKER_ENSURE_STATUS.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const DOCKER_ENV = resolve(__dirname, "../../docker/docker-env.sh");

/** The engine is this jest run's: its PID is the user `docker-env.sh stop` removes. */
export const dockerOwner = () => process.env.DUET_DOCKER_OWNER ?? String(process.pid);

export default function dockerSetup(): void {
  // Already under way, started by the caller (CI's .ci/run, before it installs anything).
  if (process.env.DUET_DOCKER_ENSURE_STATUS && process.env.DUET_DOCKER_ENSURE_LOG) return;
  const dir = mkdtempSync(join(tmpdir(), "duet-docker-env-"));
  const log = join(dir, "ensure.log");
  const status = join(dir, "ensure.status");
  // The exit status is written last, whole (rename), so a reader never sees half of it.
  const child = spawn(
    "bash",
    ["-c", 'bash "$0" ensure >"$1" 2>&1; echo $? >"$2.tmp"; mv "$2.tmp" "$2"', DOCKER_ENV, log, status],
    { stdio: "ignore", env: { ...process.env, DUET_DOCKER_OWNER: dockerOwner() } },
  );
  child.unref();
  // Read by the test files (workers inherit the environment) and by the teardown.
  process.env.DUET_DOCKER_OWNER = dockerOwner();
  process.env.DUET_DOCKER_ENSURE_LOG = log;
  process.env.DUET_DOCKER_ENSURE_STATUS = status;
}

/** Waits for the set-up's `ensure` to end; throws with its output unless it succeeded. */
export async function dockerReady(timeoutMs = 600_000): Promise<string> {
  const status = process.env.DUET_DOCKER_ENSURE_STATUS;
  const log = process.env.DUET_DOCKER_ENSURE_LOG;
  if (!status || !log) throw new Error("the Docker set-up did not run (test/support/docker-setup.ts)");
  for (const started = Date.now(); !existsSync(status); await new Promise((r) => setTimeout(r, 250)))
    if (Date.now() - started > timeoutMs)
      throw new Error(`${DOCKER_ENV} ensure did not end within ${timeoutMs / 1000} s`);
  const output = readFileSync(log, "utf8");
  const code = readFileSync(status, "utf8").trim();
  if (code !== "0")
    throw new Error(
      `No Docker engine for the compose test (${DOCKER_ENV} ensure exited ${code}):\n${output}\nFix that, or set DUET_COMPOSE_TEST=off to leave the compose test out.`,
    );
  return output;
}
