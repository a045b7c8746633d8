// The CLI's own failures beyond CliError: typed, so that a command can tell them apart
// without reading their messages.
import type { EndedEntry } from "./state.js";
import { CliError, EXIT } from "./exit-codes.js";
import { endingSentence } from "./format.js";

/** A room this state file saw end; a command on it exits 4 and says how it ended. */
export class RoomEndedError extends CliError {
  constructor(readonly gone: EndedEntry) {
    super(
      `Room ${gone.code} has ended. ${endingSentence(gone.ended, gone.seat)} Open a new room with \`duet open\` if you need one.`,
      EXIT.not_found,
      "not_found",
    );
    this.name = "RoomEndedError";
  }
}

/** --code names a room this state file holds no seat in (and never saw end). Exit 2. */
export class NoSeatError extends CliError {
  constructor(
    readonly room: string,
    readonly statePath: string,
  ) {
    super(`No seat in room ${room} in ${statePath}; run \`duet join ${room}\` first.`);
    this.name = "NoSeatError";
  }
}
