// duet wait: waits until the other agent has joined the room, or with --read until the
// peer has read (acked) a message this seat sent.
import { type Command, Option } from "commander";
import { DuetTimeoutError } from "../../errors.js";
import { positiveInteger } from "../arguments.js";
import type { ReadResult } from "../../options.js";
import type { Cli, GlobalOptions } from "../context.js";
import { CliError, EXIT } from "../exit-codes.js";
import { endingSentence } from "../format.js";
import type { RoomEntry } from "../state.js";

export function registerWait(program: Command, cli: Cli): void {
  program
    .command("wait")
    .description("wait until the other agent has joined the room; with --read, until the peer has read a message")
    .addOption(
      new Option(
        "--read <id>",
        "wait until the peer has read (acked) this message of yours and every earlier one; `last`: the last one this seat sent",
      ),
    )
    .addOption(
      new Option("--timeout <ms>", "give up after this long").default(300_000).argParser(positiveInteger("--timeout")),
    )
    .action(async (waitOptions: { timeout: number; read?: string }, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      if (waitOptions.read !== undefined)
        return waitForRead(cli, entry, options, waitOptions.read, waitOptions.timeout);
      cli.spinner.start("waiting for the peer to join");
      const status = await cli.inRoom(entry, () =>
        cli.clientForRoom(options, entry).waitForPeer(cli.seatOf(entry), {
          timeoutMs: waitOptions.timeout,
          signal: cli.io.interrupt,
          onWait: cli.showWait("waiting"),
        }),
      );
      cli.print(cli.json ? JSON.stringify({ code: entry.code, ...status }) : `The peer has joined room ${entry.code}.`);
    });
}

async function waitForRead(
  cli: Cli,
  entry: RoomEntry,
  options: GlobalOptions,
  which: string,
  timeoutMs: number,
): Promise<void> {
  const id = which === "last" ? entry.lastSent : which;
  if (id === undefined)
    throw new CliError(
      `This seat has sent nothing from ${cli.state.path} yet, so there is no last message: pass its id (duet send prints it).`,
    );
  if (!/^[0-9]{1,15}$/.test(id))
    throw new CliError(`--read takes a message id (digits, as duet send prints it) or \`last\`, not "${id}".`);
  cli.spinner.start(`waiting for the peer to read ${id}`);
  let read: ReadResult;
  try {
    read = await cli.inRoom(entry, () =>
      cli.clientForRoom(options, entry).waitUntilRead(cli.seatOf(entry), id, {
        timeoutMs,
        signal: cli.io.interrupt,
        onWait: cli.showWait("waiting for the read receipt"),
      }),
    );
  } catch (error) {
    if (error instanceof DuetTimeoutError)
      throw new CliError(`Message ${id} was not read within ${timeoutMs} ms.`, EXIT.timeout, "timeout");
    throw error;
  }
  if (read.ended) cli.state.markEnded(entry, read.ended);
  if (cli.json)
    cli.print(
      JSON.stringify({
        code: entry.code,
        id,
        read: true,
        unread: read.unread,
        ...(read.ended ? { ended: read.ended } : {}),
      }),
    );
  else cli.print(`Message ${id} was read.${read.ended ? ` ${endingSentence(read.ended, entry.seat)}` : ""}`);
}
