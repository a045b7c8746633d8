// Stops the dockerd that the setup started (by its PID), and nothing else: once the set-up's
// `ensure` has ended (`stop` takes the same lock), as this run's user of the engine.
import { spawnSync } from "node:child_process";
import { DOCKER_ENV, dockerOwner } from "./docker-setup";

export default function dockerTeardown(): void {
  spawnSync("bash", [DOCKER_ENV, "stop"], {
    stdio: ["ignore", "inherit", "inherit"],
    timeout: 660_000,
    env: { ...process.env, DUET_DOCKER_OWNER: dockerOwner() },
  });
}
