// duet close: closes the room for both seats and forgets its token.
import type { Command } from "commander";
import { DuetError } from "../../errors.js";
import type { Cli } from "../context.js";
import { NoSeatError, RoomEndedError } from "../errors.js";
import { CliError } from "../exit-codes.js";
import { endingSentence } from "../format.js";
import type { EndedEntry, RoomEntry } from "../state.js";

export function registerClose(program: Command, cli: Cli): void {
  program
    .command("close")
    .description(
      "close the room for both seats and forget its token; refused while messages are unacked unless --force",
    )
    .option("--force", "close even if messages are unacked (they are abandoned)")
    .action(async (closeOptions: { force?: boolean }, command: Command) => {
      const options = cli.globals(command);
      // A room that already ended is what close wants: say how it ended, exit 0.
      const alreadyEnded = (gone: EndedEntry) => {
        cli.state.forgetEnded(gone.code);
        if (cli.json)
          cli.print(JSON.stringify({ code: gone.code, ok: true, ...(gone.ended ? { ended: gone.ended } : {}) }));
        else cli.print(`Room ${gone.code} had already ended. ${endingSentence(gone.ended, gone.seat)}`);
      };
      let entry: RoomEntry;
      try {
        entry = await cli.roomFor(options);
      } catch (error) {
        if (error instanceof RoomEndedError) return alreadyEnded(error.gone);
        if (error instanceof NoSeatError)
          throw new CliError(`No seat in room ${error.room} in ${error.statePath}: nothing to close here.`);
        throw error;
      }
      try {
        const client = cli.clientForRoom(options, entry);
        // What `duet recv` printed was handled: its receipt first, so it does not block the close.
        if (entry.printed?.length && !closeOptions.force) await client.ack(cli.seatOf(entry), entry.printed);
        await client.close(cli.seatOf(entry), { force: closeOptions.force === true });
      } catch (error) {
        if (!(error instanceof DuetError && error.code === "not_found")) throw error;
        return alreadyEnded(cli.state.markEnded(entry, error.ended));
      }
      cli.state.remove(entry.code);
      cli.print(cli.json ? JSON.stringify({ code: entry.code, ok: true }) : `Closed room ${entry.code}.`);
    });
}
