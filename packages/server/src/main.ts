// The relay process: read the configuration, start the relay (relay.ts), and shut down
// gracefully on SIGTERM/SIGINT. Not a library: importing it starts a relay.
import { ConfigError, loadConfig, type Config } from "./config.js";
import { createLogger, safeError } from "./logger.js";
import { startRelay } from "./relay.js";

async function main(): Promise<void> {
  // A promise nobody awaited must not take the relay down with every request it holds.
  process.on("unhandledRejection", (reason) => {
    process.stderr.write(`${JSON.stringify({ level: "error", msg: "unhandled rejection", err: safeError(reason) })}\n`);
  });
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`duet: ${error.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  const relay = await startRelay(config, logger);
  // Installed before "listening" is logged: whoever waits for that line may signal at once.
  // Ctrl-C under `pnpm start` reaches the relay twice (from the terminal, and forwarded by
  // pnpm): a repeated signal must not cut the drain short (the drain has its own bound).
  let stopping = false;
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      relay.shutdown().then(
        () => logger.flush(() => process.exit(0)),
        (error) => {
          logger.error({ err: error }, "shutdown failed");
          process.exit(1);
        },
      );
    });
  }
  // Redis holds data in a storage format this release does not know (docs/redis.md §6). A
  // check cut short by a shutdown (its connection closed) is no such refusal.
  relay.storageFormat.catch((error: unknown) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`duet: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
    relay.shutdown().finally(() => process.exit(1));
  });
  logger.info({ url: relay.url, metricsUrl: relay.metricsUrl, store: relay.store.kind }, "listening");
  // Whoever started us (a supervisor, a test) learns the URL now, not at the next 4 KiB;
  // after that, buffered lines reach stdout within a second.
  logger.flush();
  setInterval(() => logger.flush(), 1000).unref();
}

main().catch((error) => {
  process.stderr.write(`duet: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
