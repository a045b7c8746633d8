// duet status: the room as this seat sees it.
import type { Command } from "commander";
import type { Cli } from "../context.js";
import { formatStatus } from "../format.js";

export function registerStatus(program: Command, cli: Cli): void {
  program
    .command("status")
    .description("show the room: members, time left, whether the peer joined and is active, pending counts")
    .action(async (_options, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      const status = await cli.inRoom(entry, () => cli.clientForRoom(options, entry).status(cli.seatOf(entry)));
      cli.print(cli.json ? JSON.stringify({ code: entry.code, ...status }) : formatStatus(entry.code, status));
    });
}
