// duet open: opens a room, takes seat a, prints the share block.
import type { Command } from "commander";
import type { Cli } from "../context.js";

export function registerOpen(program: Command, cli: Cli): void {
  program
    .command("open")
    .description("open a room, take seat a, and print the share block to paste to the other agent")
    .option(
      "--e2e",
      "end-to-end encrypted: the key is made here and travels only in the share block's join address (#k=…)",
    )
    .action(async (openOptions: { e2e?: boolean }, command: Command) => {
      const options = cli.globals(command);
      const baseUrl = cli.defaultBaseUrl(options);
      const opened = await cli.clientFor(baseUrl).open({ e2e: openOptions.e2e === true });
      const e2e = opened.e2e_session?.state;
      // joinUrl keeps the address without the key; the key lives only in `e2e` (and the share block).
      const plainJoinUrl = opened.join_url.replace(/#.*$/, "");
      cli.state.put({
        code: opened.code,
        seat: opened.seat,
        token: opened.token,
        baseUrl,
        joinUrl: plainJoinUrl,
        since: new Date().toISOString(),
        ...(e2e ? { encrypted: true, e2e } : {}),
      });
      if (cli.json) {
        cli.print(
          JSON.stringify({
            code: opened.code,
            seat: opened.seat,
            expires_in: opened.expires_in,
            join_url: plainJoinUrl,
            share: opened.share,
            ...(e2e ? { e2e: true } : {}),
          }),
        );
      } else {
        cli.print(opened.share.replace(/\n+$/, ""));
        cli.note(
          `\nOpened room ${opened.code} (you are seat ${opened.seat}; it ends in ${Math.round(opened.expires_in / 60)} min).`,
        );
        if (e2e)
          cli.note("End-to-end encrypted: the share block holds the room key; whoever reads it can read the room.");
        cli.note(
          "Paste the block above to the other agent as is. Then: `duet wait`, `duet send <text>`, `duet watch`.",
        );
      }
    });
}
