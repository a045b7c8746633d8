// What every command shares: the process it runs in (CliIo), output, the state file, the
// progress line, and the steps that find the room a command acts on and talk to its relay.
import type { Command } from "commander";
import { DuetClient } from "../client.js";
import { E2eSession } from "../e2e.js";
import { DuetError } from "../errors.js";
import type { OpenedMessage, RejectedMessage, SeatCredentials, WaitEvent } from "../options.js";
import { extractRoomCode } from "../room-input.js";
import { DEFAULT_BASE_URL } from "../transport.js";
import { NoSeatError, RoomEndedError } from "./errors.js";
import { servedBaseUrl } from "./served.js";
import { CliError, EXIT } from "./exit-codes.js";
import { Spinner } from "./spinner.js";
import { type RoomEntry, StateStore, defaultStateDir } from "./state.js";

/** Everything the CLI touches outside itself, so that it can run in tests too. */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadStream;
  /** Fires on SIGINT/SIGTERM; commands that wait stop cleanly. */
  interrupt: AbortSignal;
}

/** The global flags, as every command sees them. */
export interface GlobalOptions {
  json?: boolean;
  baseUrl?: string;
  code?: string;
}

export class Cli {
  /** --json: one JSON value on stdout, notes off. Set from argv at once, then from the parsed flags. */
  json: boolean;
  readonly spinner: Spinner;
  readonly state: StateStore;

  constructor(
    readonly io: CliIo,
    argv: string[],
  ) {
    this.json = argv.includes("--json");
    this.spinner = new Spinner(io.stderr);
    this.state = new StateStore(defaultStateDir(io.env));
  }

  /** A line on stdout: the command's result. */
  print(line: string): void {
    this.io.stdout.write(`${line}\n`);
  }

  /** A line on stderr for people (never with --json). */
  note(line: string): void {
    if (!this.json) this.io.stderr.write(`${line}\n`);
  }

  /** The global flags of the running command. */
  globals(command: Command): GlobalOptions {
    const options = command.optsWithGlobals() as GlobalOptions;
    this.json = options.json === true;
    return options;
  }

  clientFor(baseUrl: string): DuetClient {
    return new DuetClient({ baseUrl });
  }

  /**
   * The relay of a command that names no room: --base-url, else $DUET_URL, else the relay
   * this file was downloaded from, else the default.
   */
  defaultBaseUrl(options: GlobalOptions): string {
    return options.baseUrl ?? this.io.env.DUET_URL ?? servedBaseUrl ?? DEFAULT_BASE_URL;
  }

  clientForRoom(options: GlobalOptions, entry: RoomEntry): DuetClient {
    return this.clientFor(options.baseUrl ?? entry.baseUrl);
  }

  seatOf(entry: RoomEntry): SeatCredentials {
    return { code: entry.code, token: entry.token };
  }

  /** Shows why a flow waits on the progress line. */
  showWait(what: string): (event: WaitEvent) => void {
    return (event) => {
      const seconds = Math.ceil(event.delayMs / 1000);
      const reason: Record<WaitEvent["reason"], string> = {
        rate_limited: `rate limited; retrying in ${seconds} s`,
        mailbox_full: "mailbox full; waiting for the peer to ack",
        network: `relay unreachable; retrying in ${seconds} s`,
        unavailable: `relay unavailable; retrying in ${seconds} s`,
        peer: "waiting for the peer to join",
      };
      this.spinner.start(`${what}: ${reason[event.reason]}`);
    };
  }

  /**
   * The room a command acts on: --code, else the only room in the state file. With several,
   * entries whose room is gone (expired while nobody looked) are dropped first, so stale
   * entries never make a command ambiguous. A room that this state file saw end throws
   * RoomEndedError (exit 4), saying how it ended; --code of a room it holds no seat in
   * throws NoSeatError.
   */
  async roomFor(options: GlobalOptions): Promise<RoomEntry> {
    const { state } = this;
    if (options.code !== undefined) {
      const room = extractRoomCode(options.code);
      if (!room) throw new CliError(`"${options.code}" is not a room code (like k7dq-3mxa-9z2f).`);
      const entry = state.get(room.code);
      const gone = state.endedRooms().find((ended) => ended.code === room.code);
      if (!entry && gone) throw new RoomEndedError(gone);
      if (!entry) throw new NoSeatError(room.code, state.path);
      return entry;
    }
    let rooms = state.list();
    if (rooms.length > 1) {
      const alive = await Promise.all(
        rooms.map(async (entry) => {
          try {
            await this.clientForRoom(options, entry).status(this.seatOf(entry), { timeoutMs: 5000 });
          } catch (error) {
            if (error instanceof DuetError && error.code === "not_found") {
              state.markEnded(entry, error.ended);
              return false;
            }
          }
          return true;
        }),
      );
      rooms = rooms.filter((_, index) => alive[index]);
    }
    if (rooms.length === 0) {
      const [lastEnded] = state.endedRooms();
      if (lastEnded) throw new RoomEndedError(lastEnded);
      throw new CliError("No room yet: run `duet open`, or `duet join <code>` with the code you were given.");
    }
    if (rooms.length > 1)
      throw new CliError(`Several rooms (${rooms.map((r) => r.code).join(", ")}): pass --code <code>.`);
    return rooms[0]!;
  }

  /** Runs a room command; when the relay says the room is gone, forgets its token (and keeps how it ended). */
  async inRoom<T>(entry: RoomEntry, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      if (error instanceof DuetError && error.code === "not_found") this.state.markEnded(entry, error.ended);
      throw error;
    } finally {
      this.spinner.stop();
    }
  }

  /** The seat's encryption session, or undefined in a plain room; refuses when the key is missing. */
  sessionOf(entry: RoomEntry): E2eSession | undefined {
    if (entry.e2e) return new E2eSession(entry.code, entry.seat, entry.e2e);
    if (entry.encrypted) {
      throw new CliError(
        `Room ${entry.code} is end-to-end encrypted and this seat has no room key: run \`duet join '<join address with #k=…>'\` with the address from the share block.`,
        EXIT.e2e,
        "e2e",
      );
    }
    return undefined;
  }

  /**
   * The state file's `printed` ids after a call that carried `acked` as its ack: those go,
   * `added` (printed just now, not acked) join. Other fields are left as they are now.
   */
  notePrinted(code: string, acked: readonly string[], added: readonly string[] = []): void {
    if (acked.length === 0 && added.length === 0) return;
    this.state.update(code, (entry) => {
      const kept = (entry.printed ?? []).filter((id) => !acked.includes(id));
      const printed = [...kept, ...added.filter((id) => !kept.includes(id))];
      if (printed.length > 0) entry.printed = printed;
      else delete entry.printed;
    });
  }

  /** Keeps what recv learned (highest seq, ids seen) without touching what a concurrent send keeps. */
  saveReceived(session: E2eSession): void {
    this.state.update(session.code, (entry) => {
      if (entry.e2e) Object.assign(entry.e2e, { recvSeq: session.state.recvSeq, seen: session.state.seen });
    });
  }

  reportRejected(rejected: RejectedMessage): void {
    this.io.stderr.write(
      (this.json
        ? JSON.stringify({ refused: rejected })
        : `duet: message ${rejected.id} from ${rejected.from} refused: it ${rejected.explanation}. It stays pending; \`duet ack ${rejected.id}\` drops it.`) +
        "\n",
    );
  }

  noteGap(message: OpenedMessage): void {
    if (message.missing) {
      const { from, to } = message.missing;
      this.note(
        `note: message${from === to ? ` ${from}` : `s ${from} to ${to}`} from ${message.from} never arrived (a gap in its sequence numbers).`,
      );
    }
  }
}
