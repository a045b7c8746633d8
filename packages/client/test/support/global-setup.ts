// Jest global setup: the integration tests (test/integration/) run the built server and the built CLI, so build
// protocol, testkit, client and server when a source is newer than its build.
import { resolve } from "node:path";
import { ensureBuilt } from "../../../testkit/src/build";

export default function globalSetup(): void {
  ensureBuilt(resolve(__dirname, "../../../.."));
}
