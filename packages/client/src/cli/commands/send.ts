// duet send: sends a text to the peer (arguments or stdin) and prints its id.
import { type Command, Option } from "commander";
import { E2eSession } from "../../e2e.js";
import { textToSend } from "../../encrypted-room.js";
import { positiveInteger, readAll } from "../arguments.js";
import type { Cli } from "../context.js";
import { CliError } from "../exit-codes.js";
import type { RoomEntry } from "../state.js";

export function registerSend(program: Command, cli: Cli): void {
  program
    .command("send")
    .description("send a text to the peer (from the arguments, or from stdin when there are none or the argument is -)")
    .argument("[text...]", "the text; words are joined with spaces")
    .addOption(
      new Option("--timeout <ms>", "give up after this long (rate limits, full mailbox)")
        .default(120_000)
        .argParser(positiveInteger("--timeout")),
    )
    .addOption(
      new Option("--key <idempotency-key>", "reuse a key to retry an earlier send safely (default: a fresh one)"),
    )
    .action(async (words: string[], sendOptions: { timeout: number; key?: string }, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      let text: string;
      if (words.length === 0 || (words.length === 1 && words[0] === "-")) {
        if (cli.io.stdin.isTTY) throw new CliError("No text: pass it as arguments, or pipe it on stdin.");
        // One trailing newline is how `echo` and editors end text, not part of the message.
        text = (await readAll(cli.io.stdin)).replace(/\r?\n$/, "");
      } else {
        text = words.join(" ");
      }
      if (text.length === 0) throw new CliError("The text is empty; duet sends non-empty text only.");
      const wire = sealed(cli, entry, text);
      const sent = await cli.inRoom(entry, () =>
        cli.clientForRoom(options, entry).send(cli.seatOf(entry), wire, {
          timeoutMs: sendOptions.timeout,
          idempotencyKey: sendOptions.key,
          signal: cli.io.interrupt,
          onWait: cli.showWait("sending"),
        }),
      );
      cli.print(cli.json ? JSON.stringify({ code: entry.code, id: sent.id }) : sent.id);
    });
}

/**
 * The text as it goes on the wire. In an encrypted room it is sealed by the SDK with the
 * next sequence number as the state file has it now (a `duet send` in another process may
 * have taken one since this command started), and that number is kept before sending. A
 * text that cannot fit is refused (too_large, exit 8) before the state file changes.
 */
function sealed(cli: Cli, entry: RoomEntry, text: string): string {
  const session = cli.sessionOf(entry);
  if (!session) return text;
  let envelope: string | undefined;
  cli.state.update(entry.code, (current) => {
    envelope = textToSend(new E2eSession(current.code, current.seat, current.e2e ?? session.state), text);
  });
  if (envelope === undefined) throw new CliError(`Room ${entry.code} is no longer in ${cli.state.path}.`);
  return envelope;
}
