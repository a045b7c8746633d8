import { rmSync } from "node:fs";

export default async function globalTeardown() {
  await Promise.all([
    globalThis.__TEST_REDIS_STOP__?.(),
    globalThis.__TEST_CLUSTER_STOP__?.(),
    globalThis.__TEST_SENTINEL_STOP__?.(),
  ]);
  // The run's temp directory (see global-setup.ts), with whatever a test left in it.
  if (globalThis.__TEST_TMPDIR__) rmSync(globalThis.__TEST_TMPDIR__, { recursive: true, force: true });
}
