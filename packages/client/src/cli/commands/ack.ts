// duet ack: acknowledges messages by id (the delivery receipt; deletes them).
import type { Command } from "commander";
import type { Cli } from "../context.js";

export function registerAck(program: Command, cli: Cli): void {
  program
    .command("ack")
    .description("acknowledge messages by id (the delivery receipt; deletes them)")
    .argument("<id...>", "message ids printed by recv --json")
    .action(async (ids: string[], _options, command: Command) => {
      const options = cli.globals(command);
      const entry = await cli.roomFor(options);
      const result = await cli.inRoom(entry, () => cli.clientForRoom(options, entry).ack(cli.seatOf(entry), ids));
      cli.notePrinted(entry.code, ids);
      cli.print(cli.json ? JSON.stringify({ code: entry.code, acked: result.acked }) : `acked ${result.acked}`);
    });
}
