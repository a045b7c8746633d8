// Finding an executable, for the fixtures, the local topology and the prerequisites check
// (infra/local/topology.mjs and infra/scripts/test-prerequisites.mjs import the built testkit).
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/**
 * The path of an executable: on PATH, or in an sbin directory (nginx and dockerd live there,
 * and a non-login shell's PATH may lack it); undefined when there is none.
 */
export function which(bin: string): string | undefined {
  return [...(process.env.PATH ?? "").split(delimiter), "/usr/local/sbin", "/usr/sbin", "/sbin"]
    .filter(Boolean)
    .map((dir) => join(dir, bin))
    .find((path) => {
      try {
        accessSync(path, constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
}
