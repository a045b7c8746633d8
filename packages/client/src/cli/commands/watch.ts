// duet watch: prints messages as they arrive, acking each once printed, until Ctrl-C,
// --count, --timeout or the room's end.
import { MAX_WAIT_MS } from "@duet/protocol";
import { type Command, Option } from "commander";
import { DuetE2eError } from "../../encrypted-room.js";
import { DuetError } from "../../errors.js";
import type { OpenedMessage } from "../../options.js";
import { positiveInteger, waitArgument } from "../arguments.js";
import type { Cli } from "../context.js";
import { CliError, EXIT } from "../exit-codes.js";
import { endingSentence, formatMessage } from "../format.js";

interface WatchOptions {
  count?: number;
  timeout?: number;
  wait: number;
  longPoll?: boolean;
}

export function registerWatch(program: Command, cli: Cli): void {
  program
    .command("watch")
    .description(
      "print messages as they arrive, one per line, acking each after it is printed, and read receipts of yours (read: <ids>); Ctrl-C stops",
    )
    .addOption(new Option("--count <n>", "exit after this many messages").argParser(positiveInteger("--count")))
    .addOption(
      new Option("--timeout <ms>", "stop after this long (exit 9 if --count messages did not all arrive)").argParser(
        positiveInteger("--timeout"),
      ),
    )
    .addOption(
      new Option("--wait <ms>", `long-poll wait per request, 0..${MAX_WAIT_MS} (when long-polling)`)
        .default(MAX_WAIT_MS)
        .argParser(waitArgument),
    )
    .addOption(
      new Option(
        "--long-poll",
        "use recv long-polls instead of the push stream (watch falls back to them by itself when the stream cannot work, e.g. behind a buffering proxy)",
      ),
    )
    .action(async (watchOptions: WatchOptions, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      const { interrupt } = cli.io;
      const timeout = watchOptions.timeout === undefined ? undefined : AbortSignal.timeout(watchOptions.timeout);
      const signal = timeout ? AbortSignal.any([interrupt, timeout]) : interrupt;
      const session = cli.sessionOf(entry);
      cli.spinner.start("waiting for messages (Ctrl-C stops)");
      let handled: number;
      try {
        ({ handled } = await cli.inRoom(entry, () =>
          cli.clientForRoom(options, entry).receiveLoop(
            { ...cli.seatOf(entry), e2e: session },
            (message: OpenedMessage) => {
              cli.spinner.stop();
              if (session) cli.saveReceived(session);
              cli.print(cli.json ? JSON.stringify(message) : formatMessage(message));
              cli.noteGap(message);
              cli.spinner.start("waiting for messages (Ctrl-C stops)");
            },
            {
              signal,
              maxMessages: watchOptions.count,
              waitMs: watchOptions.wait,
              onWait: cli.showWait("watching"),
              transport: watchOptions.longPoll ? "long-poll" : "auto",
              // Read receipts of this seat's own messages, from the stream.
              onRead: (ids) => {
                cli.spinner.stop();
                cli.print(cli.json ? JSON.stringify({ event: "read", ids }) : `read: ${ids.join(" ")}`);
                cli.spinner.start("waiting for messages (Ctrl-C stops)");
              },
            },
          ),
        ));
      } catch (error) {
        // The peer closing the room is how a conversation ends: not a failure of watch (exit 0,
        // docs/cli.md). With --json the ending is the last line on stdout, with the fields the
        // relay gave (docs/protocol.md §16); "gone" when it no longer says how (as a stream's end).
        if (error instanceof DuetError && error.code === "not_found") {
          if (cli.json)
            cli.print(JSON.stringify({ event: "end", reason: error.ended?.reason ?? "gone", ...error.ended }));
          cli.note(`${endingSentence(error.ended, entry.seat)} Its seat is forgotten.`);
          return;
        }
        if (error instanceof DuetE2eError) {
          cli.reportRejected(error.rejected);
          throw new CliError("watch stopped at a refused message; nothing of it was printed.", EXIT.e2e, "e2e");
        }
        throw error;
      }
      if (timeout?.aborted && !interrupt.aborted && watchOptions.count !== undefined && handled < watchOptions.count) {
        throw new CliError(
          `Got ${handled} of ${watchOptions.count} messages within ${watchOptions.timeout} ms.`,
          EXIT.timeout,
          "timeout",
        );
      }
    });
}
