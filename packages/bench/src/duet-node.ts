// One duet node for the bench: the product's own startRelay and configuration, run in a
// child process that also reports its metrics over IPC (see node-metrics.ts).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import type { DuetApp } from "@duet/server/dist/app.js";
import { connectionCount, reportMetrics } from "./node-metrics.js";

// DUET_SERVER_DIST runs another build of the server (`pnpm --filter @duet/bench ab`): a
// copy of an older dist/ beside the current one, so both resolve the same dependencies.
const dist = process.env.DUET_SERVER_DIST ?? dirname(require.resolve("@duet/server/dist/relay.js"));
const { loadConfig } = require(join(dist, "config.js")) as typeof import("@duet/server/dist/config.js");
const { createLogger } = require(join(dist, "logger.js")) as typeof import("@duet/server/dist/logger.js");
// The library is relay.js; builds older than that split kept startRelay in main.js.
const relayModule = existsSync(join(dist, "relay.js")) ? "relay.js" : "main.js";
const { startRelay } = require(join(dist, relayModule)) as typeof import("@duet/server/dist/relay.js");

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const relay = await startRelay(config, createLogger(config.logLevel));
  // startRelay does not hand out the app; the server's request listener is that app.
  const app = relay.server.listeners("request")[0] as DuetApp;
  // Waiting recvs and open streams: both are seats waiting for a message.
  reportMetrics(async () => ({
    waiting: app.locals.waitingRecvs.size + (app.locals.streams?.size ?? 0),
    connections: await connectionCount(relay.server),
    // Builds older than the relay's own slow-client check have none.
    timedOut: (relay as { connectionChecks?: { timedOut: number } }).connectionChecks?.timedOut,
  }));
  process.on("message", (message: { type?: string }) => {
    if (message?.type === "stop") void relay.shutdown().finally(() => process.exit(0));
  });
  process.on("disconnect", () => void relay.shutdown().finally(() => process.exit(0)));
  // The node listens before its Redis connections are up, and commands fail fast (no
  // offline queue) until they are: the bench starts loading only once it is ready.
  for (
    const deadline = Date.now() + 10_000;
    !(await relay.store.isReady());
    await new Promise((r) => setTimeout(r, 20))
  ) {
    if (Date.now() > deadline) throw new Error("store not ready after 10 s");
  }
  process.send?.({ type: "ready", url: relay.url, metricsUrl: relay.metricsUrl });
}

main().catch((error) => {
  process.stderr.write(`duet-node: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
