#!/usr/bin/env node
// Entry point of the `duet` command: wires the CLI to the process (argv, streams, signals).
import { runCli } from "./program.js";

// A reader that went away (`duet watch | head -1`) is not an error: stop quietly.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(signalExitCode ?? 0);
    throw error;
  });
}

const interrupt = new AbortController();
let signalExitCode: number | undefined;
for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const) {
  process.on(signal, () => {
    // A second signal means "now": do not wait for the clean stop.
    if (signalExitCode !== undefined) process.exit(code);
    signalExitCode = code;
    interrupt.abort();
  });
}

runCli(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  interrupt: interrupt.signal,
}).then(
  (exitCode) => {
    process.exitCode = signalExitCode ?? exitCode;
  },
  (error: unknown) => {
    process.stderr.write(`duet: unexpected error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
