// Structured logs: one JSON line per event (pino). Tokens never reach a log line: requests
// are logged by route pattern and status only, never their URL, headers or body, and
// errors by type and message only (an ioredis error carries its command's arguments).
import pino, { type Logger } from "pino";

export type { Logger };

/**
 * The logger. By default it writes to stdout through a buffered, asynchronous destination:
 * a synchronous write per request line cost about a tenth of a busy node's CPU (see
 * packages/bench/PROFILE.md). main flushes it once a second and after the drain on
 * SIGTERM/SIGINT; pino's own exit hook writes what is left synchronously on process.exit and
 * on an uncaught exception. Only a SIGKILL or an out-of-memory abort loses the last second's
 * lines (docs/metrics.md, test/unit/logger.test.ts).
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: safeError },
    },
    destination ?? pino.destination({ dest: 1, sync: false, minLength: 4096 }),
  );
}

/** An error as it may be logged: its type, message and stack, no attached data. */
export function safeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  return { type: error.name, message: error.message, stack: error.stack };
}
