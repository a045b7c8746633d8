// duet send: sends a text to the peer (arguments or stdin) and prints its id; with
// --wait-read, then waits until the peer has read it. It acks what `duet recv` printed (or
// --ack's ids) on the way, as the send's `ack`: the answer is the receipt, no call of its own.
import { type Command, Option } from "commander";
import { E2eSession } from "../../e2e.js";
import { textToSend } from "../../encrypted-room.js";
import { DuetTimeoutError } from "../../errors.js";
import { positiveInteger, readAll } from "../arguments.js";
import type { Cli } from "../context.js";
import { CliError, EXIT } from "../exit-codes.js";
import { endingSentence } from "../format.js";
import type { RoomEntry } from "../state.js";

const SEND_TIMEOUT_MS = 120_000;
const READ_TIMEOUT_MS = 300_000;

interface SendOptions {
  timeout?: number;
  key?: string;
  waitRead?: boolean;
  /** undefined: what `duet recv` printed; false (--no-ack): nothing; else the ids given. */
  ack?: string | false;
}

export function registerSend(program: Command, cli: Cli): void {
  program
    .command("send")
    .description("send a text to the peer (from the arguments, or from stdin when there are none or the argument is -)")
    .argument("[text...]", "the text; words are joined with spaces")
    .option(
      "--wait-read",
      "then wait until the peer has read (acked) it: exit 0 once read, 9 when --timeout runs out first",
    )
    .addOption(
      new Option(
        "--timeout <ms>",
        `give up after this long (rate limits, full mailbox; with --wait-read also the peer reading it); default ${SEND_TIMEOUT_MS}, ${READ_TIMEOUT_MS} with --wait-read`,
      ).argParser(positiveInteger("--timeout")),
    )
    .addOption(
      new Option("--key <idempotency-key>", "reuse a key to retry an earlier send safely (default: a fresh one)"),
    )
    .option(
      "--ack <ids>",
      "ack these message ids (comma-separated) with this send; default: the ones `duet recv` printed and nobody acked yet",
    )
    .option("--no-ack", "ack nothing with this send")
    .action(async (words: string[], sendOptions: SendOptions, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      const started = Date.now();
      const timeoutMs = sendOptions.timeout ?? (sendOptions.waitRead ? READ_TIMEOUT_MS : SEND_TIMEOUT_MS);
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
      const client = cli.clientForRoom(options, entry);
      const ack =
        sendOptions.ack === false
          ? []
          : sendOptions.ack === undefined
            ? (entry.printed ?? [])
            : sendOptions.ack.split(/[\s,]+/).filter((id) => id !== "");
      const sent = await cli.inRoom(entry, () =>
        client.send(cli.seatOf(entry), wire, {
          timeoutMs,
          idempotencyKey: sendOptions.key,
          signal: cli.io.interrupt,
          onWait: cli.showWait("sending"),
          ack,
        }),
      );
      cli.notePrinted(entry.code, ack);
      cli.state.update(entry.code, (current) => {
        current.lastSent = sent.id;
      });
      if (!sendOptions.waitRead) {
        cli.print(cli.json ? JSON.stringify({ code: entry.code, id: sent.id }) : sent.id);
        return;
      }
      // The id first, so that it is known even if the wait is cut short.
      if (!cli.json) cli.print(sent.id);
      cli.spinner.start(`waiting for the peer to read ${sent.id}`);
      try {
        const read = await cli.inRoom(entry, () =>
          client.waitUntilRead(cli.seatOf(entry), sent.id, {
            timeoutMs: Math.max(1, timeoutMs - (Date.now() - started)),
            signal: cli.io.interrupt,
            onWait: cli.showWait("waiting for the read receipt"),
          }),
        );
        if (read.ended) cli.state.markEnded(entry, read.ended);
        if (cli.json)
          cli.print(
            JSON.stringify({ code: entry.code, id: sent.id, read: true, ...(read.ended ? { ended: read.ended } : {}) }),
          );
        else cli.note(`Message ${sent.id} was read.${read.ended ? ` ${endingSentence(read.ended, entry.seat)}` : ""}`);
      } catch (error) {
        if (cli.json) cli.print(JSON.stringify({ code: entry.code, id: sent.id, read: false }));
        if (error instanceof DuetTimeoutError)
          throw new CliError(
            `Message ${sent.id} was sent but not read within ${timeoutMs} ms. \`duet wait --read ${sent.id}\` waits again; do not send it again.`,
            EXIT.timeout,
            "timeout",
          );
        throw error;
      }
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
