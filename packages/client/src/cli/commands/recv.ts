// duet recv: prints the pending messages once. What it printed is acked by the next `duet
// recv` or `duet send` of the room (as their `ack`, no call of its own), or at once with --ack.
import { MAX_WAIT_MS } from "@duet/protocol";
import { type Command, Option } from "commander";
import { waitArgument } from "../arguments.js";
import type { Cli } from "../context.js";
import { CliError, EXIT } from "../exit-codes.js";
import { formatMessage } from "../format.js";

export function registerRecv(program: Command, cli: Cli): void {
  program
    .command("recv")
    .description(
      "print pending messages (one per line: <seat>: <text>, newlines escaped); your next recv or send acks them (--ack: at once)",
    )
    .addOption(
      new Option("--wait <ms>", `wait up to this long for a message, 0..${MAX_WAIT_MS}`)
        .default(MAX_WAIT_MS)
        .argParser(waitArgument),
    )
    .option(
      "--ack",
      "acknowledge the printed messages now, with a call of its own (default: the next recv or send does)",
    )
    .addOption(
      new Option(
        "--peek",
        "ack nothing: what earlier recvs printed stays unacked, and what this one prints is not remembered",
      ).conflicts("ack"),
    )
    .action(async (recvOptions: { wait: number; ack?: boolean; peek?: boolean }, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      const client = cli.clientForRoom(options, entry);
      const seat = cli.seatOf(entry);
      if (recvOptions.wait > 0)
        cli.spinner.start(`waiting up to ${Math.round(recvOptions.wait / 1000)} s for a message`);
      const session = cli.sessionOf(entry);
      // What the last recv printed is handled by now: acked by this recv before it reads.
      const printedBefore = recvOptions.peek ? [] : (entry.printed ?? []);
      const { messages, rejected = [] } = await cli.inRoom(entry, () =>
        client.recv(
          { ...seat, e2e: session },
          { waitMs: recvOptions.wait, signal: cli.io.interrupt, onWait: cli.showWait("receiving"), ack: printedBefore },
        ),
      );
      cli.spinner.stop();
      if (session) cli.saveReceived(session);
      if (!recvOptions.peek)
        cli.notePrinted(entry.code, printedBefore, recvOptions.ack ? [] : messages.map((m) => m.id));
      if (cli.json) cli.print(JSON.stringify({ code: entry.code, messages, ...(session ? { rejected } : {}) }));
      else for (const message of messages) cli.print(formatMessage(message));
      for (const message of messages) cli.noteGap(message);
      for (const refused of rejected) cli.reportRejected(refused);
      // Acked only once printed: a crash before this line leaves them pending, never lost.
      if (recvOptions.ack && messages.length > 0) {
        await cli.inRoom(entry, () =>
          client.ack(
            seat,
            messages.map((m) => m.id),
          ),
        );
      } else if (messages.length > 0) {
        cli.note(
          recvOptions.peek
            ? `Not acked (--peek): \`duet ack ${messages.map((m) => m.id).join(" ")}\` once handled.`
            : "Acked by your next `duet recv` or `duet send` (or now: `duet ack <ids>`).",
        );
      } else if (rejected.length === 0) {
        cli.note("No messages.");
      }
      if (rejected.length > 0) {
        throw new CliError(
          `${rejected.length} message${rejected.length === 1 ? " was" : "s were"} refused (see above); none of them was printed.`,
          EXIT.e2e,
          "e2e",
        );
      }
    });
}
