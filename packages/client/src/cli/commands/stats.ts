// duet stats: the relay's public tally.
import type { Command } from "commander";
import type { Cli } from "../context.js";

export function registerStats(program: Command, cli: Cli): void {
  program
    .command("stats")
    .description("the relay's public tally (counts only)")
    .action(async (_options, command: Command) => {
      const options = cli.globals(command);
      const stats = await cli.clientFor(cli.defaultBaseUrl(options)).stats();
      cli.print(
        cli.json
          ? JSON.stringify(stats)
          : Object.entries(stats)
              .map(([k, v]) => `${k}: ${v}`)
              .join("\n"),
      );
    });
}
