// A Docker engine, Compose v2 and the base-image stand-ins for compose.test.ts: installed,
// started or built only when missing, each said in one line (docker/docker-env.sh).
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";

export const DOCKER_ENV = resolve(__dirname, "../../docker/docker-env.sh");

export default function dockerSetup(): void {
  const result = spawnSync("bash", [DOCKER_ENV, "ensure"], {
    stdio: ["ignore", "inherit", "inherit"],
    timeout: 600_000,
  });
  if (result.status !== 0) {
    throw new Error(
      `No Docker engine for the compose test (${DOCKER_ENV} ensure exited ${result.status ?? result.signal}). Fix that, or set DUET_COMPOSE_TEST=off to leave the compose test out.`,
    );
  }
}
