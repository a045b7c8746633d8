// duet doctor: runs the relay's path self-test from here and says what to use: the stream
// or long-poll, and the longest wait that survives whatever proxies sit between.
import { MAX_WAIT_MS } from "@duet/protocol";
import { type Command, Option } from "commander";
import type { SelftestReport } from "../../selftest.js";
import { DuetError } from "../../errors.js";
import { waitArgument } from "../arguments.js";
import type { Cli } from "../context.js";
import { CliError, EXIT } from "../exit-codes.js";

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export function registerDoctor(program: Command, cli: Cli): void {
  program
    .command("doctor")
    .description(
      "check the path to the relay (about 25 s): does a long-poll survive its wait, do stream events arrive unbuffered; says what to use",
    )
    .addOption(
      new Option("--wait <ms>", `the long-poll to try, 0..${MAX_WAIT_MS}`).default(MAX_WAIT_MS).argParser(waitArgument),
    )
    .action(async (doctorOptions: { wait: number }, command: Command) => {
      const options = cli.globals(command);
      const client = cli.clientFor(cli.defaultBaseUrl(options));
      cli.spinner.start(
        `testing the path to ${client.baseUrl} (about ${Math.ceil(Math.max(doctorOptions.wait, 5000) / 1000)} s)`,
      );
      let report: SelftestReport;
      try {
        report = await client.selftest({ waitMs: doctorOptions.wait, signal: cli.io.interrupt });
      } catch (error) {
        // No self-test at that address (not a duet relay): say so, not "the room is unknown".
        if (error instanceof DuetError && (error.code === "not_found" || error.code === "method_not_allowed"))
          throw new CliError(
            `The relay at ${client.baseUrl} has no self-test (GET /v1/selftest answered ${error.status}): is this the address of a duet relay?`,
            EXIT.not_found,
            "not_found",
          );
        throw error;
      } finally {
        cli.spinner.stop();
      }
      cli.print(cli.json ? JSON.stringify(report) : describeReport(report));
    });
}

/** The report in sentences: what was seen, then what to do. */
export function describeReport(report: SelftestReport): string {
  const { longPoll, stream, advice } = report;
  const lines = [`relay:     ${report.baseUrl}`];
  if (longPoll.survived) lines.push(`long-poll: held ${seconds(longPoll.waitMs)} as asked: nothing cuts it.`);
  else
    lines.push(
      `long-poll: cut after ${seconds(longPoll.elapsedMs)} of ${seconds(longPoll.waitMs)} (${longPoll.failure?.code ?? "answered early"}): something between cuts long requests.`,
    );
  if (stream.failure)
    lines.push(`stream:    did not work (${stream.failure.code}: ${stream.failure.message.replace(/\s+$/, "")})`);
  else if (stream.buffered)
    lines.push(
      `stream:    ${stream.ticks} ticks sent over ${seconds(stream.sentSpreadMs ?? 0)} arrived within ${seconds(stream.arrivalSpreadMs ?? 0)}: something buffers streams.`,
    );
  else
    lines.push(
      `stream:    ${stream.ticks} ticks arrived over ${seconds(stream.arrivalSpreadMs ?? 0)}, as sent: events arrive unbuffered.`,
    );
  const wait = longPoll.survived ? "" : ` --wait ${advice.waitMs}`;
  lines.push(
    advice.transport === "stream"
      ? `advice:    use the stream (\`duet watch\` does)${longPoll.survived ? "." : `; long-polls at most ${advice.waitMs} ms (\`duet recv${wait}\`).`}`
      : `advice:    use long-poll: \`duet watch --long-poll${wait}\`, \`duet recv${wait}\`.`,
  );
  return lines.join("\n");
}
