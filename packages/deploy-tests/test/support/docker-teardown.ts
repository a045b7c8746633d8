// Stops the dockerd that the setup started (by its PID), and nothing else.
import { spawnSync } from "node:child_process";
import { DOCKER_ENV } from "./docker-setup";

export default function dockerTeardown(): void {
  spawnSync("bash", [DOCKER_ENV, "stop"], { stdio: ["ignore", "inherit", "inherit"], timeout: 60_000 });
}
