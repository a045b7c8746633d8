// Exit codes of the duet CLI, one per class of error, and the one-line advice for each.
// `duet --help` prints this table, and docs/cli.md copies it.
import { DuetError } from "../errors.js";

export const EXIT = {
  ok: 0,
  unexpected: 1,
  usage: 2,
  network: 3,
  not_found: 4,
  full: 5,
  unread: 6,
  busy: 7,
  rejected: 8,
  timeout: 9,
  e2e: 10,
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES_HELP = `Exit codes:
  0    success
  1    unexpected error (relay answered 5xx or something that is not duet; a bug)
  2    usage: bad arguments, no text, no room (run duet open / duet join) or several rooms (pass --code)
  3    network: the relay is unreachable or did not answer (check DUET_URL / --base-url)
  4    not_found: the room is unknown, closed or expired (the message says how it ended; its token is
       forgotten; duet close on it exits 0; open a new room)
  5    full: both seats are taken (ask the opener for a new room)
  6    unread: close refused while messages are unacked (duet recv --ack, or duet close --force)
  7    busy: still rate_limited or mailbox_full when the time ran out (retry later, same command)
  8    rejected: the relay refused the request (bad_request, too_large, unauthorized, forbidden, idempotency_conflict)
  9    timeout: what we waited for did not happen in time (peer did not join, no message)
  10   e2e: in an end-to-end encrypted room, a message was refused (tampered, wrong key, replayed or
       reflected; never printed as text, it stays pending until acked) or this seat has no room key
  130  interrupted (Ctrl-C); 143 on SIGTERM`;

/** A failure the CLI itself detects (arguments, state), with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode = EXIT.usage,
    readonly code = "usage",
  ) {
    super(message);
    this.name = "CliError";
  }
}

export function exitCodeFor(error: unknown): ExitCode {
  if (error instanceof CliError) return error.exitCode;
  if (!(error instanceof DuetError)) return EXIT.unexpected;
  switch (error.code) {
    case "network":
      return EXIT.network;
    case "not_found":
      return EXIT.not_found;
    case "full":
      return EXIT.full;
    case "unread":
      return EXIT.unread;
    case "rate_limited":
    case "mailbox_full":
      return EXIT.busy;
    case "bad_request":
    case "too_large":
    case "unauthorized":
    case "forbidden":
    case "idempotency_conflict":
    case "e2e_required":
    case "method_not_allowed":
      return EXIT.rejected;
    case "timeout":
      return EXIT.timeout;
    case "e2e":
      return EXIT.e2e;
    case "aborted":
      return EXIT.interrupted;
    default:
      return EXIT.unexpected;
  }
}

/** What the person or agent running the CLI should do next, in CLI terms. */
export function adviceFor(error: DuetError): string {
  switch (error.code) {
    case "network":
      return "Check that the relay runs at that address; set DUET_URL or --base-url.";
    case "not_found":
      // With `ended` the relay's message already says how the room ended and what to do.
      if (error.ended) return "Its seat is forgotten here; `duet open` opens a new room.";
      return "The room is unknown or has ended (a seat of it here is forgotten); open a new room with `duet open` if you need one.";
    case "full":
      return "Ask the opener for a new room.";
    case "unread":
      return "Read them with `duet recv --ack` (or `duet watch`), or abandon them with `duet close --force`.";
    case "rate_limited":
      return "Wait a minute, then run the same command again.";
    case "mailbox_full":
      return "The peer has not acked your earlier messages; try again later or ask the peer to run `duet watch`.";
    case "unauthorized":
      return "The stored seat token was refused; join the room again or open a new one.";
    case "forbidden":
      return "The relay refused this client; check DUET_URL points at a duet relay.";
    case "too_large":
      return "Publish the content at a URL the peer can fetch and send the URL instead.";
    case "timeout":
      return "Run the command again, or allow more time with --timeout.";
    case "e2e":
      return "See docs/encryption.md; `duet ack <id>` drops a refused message.";
    case "e2e_required":
      return "This room is end-to-end encrypted and this seat has no room key: run `duet join '<join address with #k=…>'`.";
    default:
      return error.remedy;
  }
}
