// duet wait: waits until the other agent has joined the room.
import { type Command, Option } from "commander";
import { positiveInteger } from "../arguments.js";
import type { Cli } from "../context.js";

export function registerWait(program: Command, cli: Cli): void {
  program
    .command("wait")
    .description("wait until the other agent has joined the room")
    .addOption(
      new Option("--timeout <ms>", "give up after this long").default(300_000).argParser(positiveInteger("--timeout")),
    )
    .action(async (waitOptions: { timeout: number }, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
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
