// How the CLI writes what it learned: messages on one line each, the status table, how a
// room ended, and an error as one line (or one JSON object with --json).
import { describeRoomEnding, type Message, type RoomEnding } from "@duet/protocol";
import { DuetError } from "../errors.js";
import type { Status } from "../options.js";
import { CliError, adviceFor } from "./exit-codes.js";

/** How the room ended, from the reader's seat; the relay stops saying after a while. */
export function endingSentence(ended: RoomEnding | undefined, seat: "a" | "b"): string {
  return ended ? describeRoomEnding(ended, seat) : "It was closed or expired (the relay no longer says which).";
}

/** An error as the one line the CLI prints after "duet: ". */
export function describeError(error: unknown): string {
  if (error instanceof DuetError) return `${error.message.replace(/\s+$/, "")} ${adviceFor(error)}`;
  if (error instanceof CliError) return error.message;
  return `unexpected error: ${error instanceof Error ? error.message : String(error)}`;
}

/** The `error` field of an error printed with --json. */
export function errorCodeOf(error: unknown): string {
  if (error instanceof DuetError) return error.code;
  if (error instanceof CliError) return error.code;
  return "unexpected";
}

/** One message on one line: control characters escaped so a text cannot fake another line. */
export function formatMessage(message: Message): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is escaped here
  const escaped = message.text.replace(/[\\\u0000-\u001f\u007f\u2028\u2029]/g, (c) => {
    const named: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
    return named[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
  return `${message.from}: ${escaped}`;
}

export function formatStatus(code: string, status: Status): string {
  return [
    `room:        ${code}`,
    `seat:        ${status.seat}`,
    `members:     ${status.members.join(", ")}`,
    `peer joined: ${status.peer_joined ? "yes" : "no"}`,
    `peer active: ${status.peer_active ? "yes" : "no"}`,
    `pending in:  ${status.pending_in}`,
    `pending out: ${status.pending_out}`,
    // The ids of this seat's messages the peer has not read (acked) yet.
    `unread:      ${status.unread.length > 0 ? status.unread.join(" ") : "none"}`,
    ...(status.e2e ? ["encrypted:   end-to-end (the relay sees only ciphertext)"] : []),
    `ends in:     ${status.expires_in} s`,
  ].join("\n");
}
