// duet rooms: the rooms this state file holds a seat in (never the tokens).
import type { Command } from "commander";
import type { Cli } from "../context.js";

export function registerRooms(program: Command, cli: Cli): void {
  program
    .command("rooms")
    .description("list the rooms this state file holds a seat in (never the tokens)")
    .action((_options, command: Command) => {
      cli.globals(command);
      const rooms = cli.state
        .list()
        .map(({ code, seat, baseUrl, since }) => ({ code, seat, base_url: baseUrl, since }));
      if (cli.json) cli.print(JSON.stringify({ rooms }));
      else if (rooms.length === 0) cli.note("No rooms.");
      else
        for (const room of rooms) cli.print(`${room.code}  seat ${room.seat}  ${room.base_url}  since ${room.since}`);
    });
}
