// The scale run's measured nodes (src/scale.ts): duet relays as child processes (the
// product's startRelay, src/duet-node.ts), as containers from the image (--container,
// src/container-node.ts) or bare servers (--bare); and reading their metrics.
import type { NodeMetrics } from "./node-metrics.js";
import { type ServerProcess, startServer } from "./processes.js";
import { startContainerNode } from "./container-node.js";
import { bare, containerImage, cpuProfileDir } from "./scale-options.js";
import { log } from "./scale-log.js";
import { sleep } from "./stats.js";

/** Starts one node; setup nodes (measured false) are always processes. No pinning: relays, clients and Redis share the cores. */
export function startNode(label: string, env: Record<string, string>, measured: boolean): Promise<ServerProcess> {
  if (bare) return startServer(label, "hold-node.js", { args: [bare], cpu: "0-1" });
  const profile = measured ? cpuProfileDir : undefined;
  if (containerImage && measured) return startContainerNode(label, containerImage, env, profile);
  const execArgv = profile ? ["--cpu-prof", `--cpu-prof-dir=${profile}`] : [];
  return startServer(label, "duet-node.js", { env, cpu: "0-1", execArgv });
}

/** A node's metrics; a node too busy to answer within 20 s is asked again (twice). */
export async function metricsOf(
  node: ServerProcess,
  request?: { gc?: boolean; resetEld?: boolean },
): Promise<NodeMetrics> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await node.metrics(request);
    } catch (error) {
      if (attempt >= 3) throw error;
      log(`${node.name} did not answer within 20 s; asking again`);
    }
  }
}
export const cpuOf = (m: NodeMetrics) => m.cpuUserUs + m.cpuSystemUs;

export async function waitUntil(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await check()); await sleep(500)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}
