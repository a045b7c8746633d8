// What the SDK does with an end-to-end encrypted room's texts (the cipher is in e2e.ts):
// seals a text to send, after checking that its envelope fits, and opens received messages,
// refusing any that does not authenticate. The CLI seals through here too.
import { ERRORS, MAX_TEXT_BYTES, MESSAGE_TEXT_FIELDS, type Message, type MessageTextField } from "@duet/protocol";
import { E2E_REJECT_EXPLANATIONS, type E2eSession } from "./e2e.js";
import { DuetError } from "./errors.js";
import type { OpenedMessage, RejectedMessage } from "./options.js";

/** Thrown by receiveLoop when a message of an encrypted room is refused; the message stays pending. */
export class DuetE2eError extends DuetError {
  constructor(readonly rejected: RejectedMessage) {
    super(
      "e2e",
      `Message ${rejected.id} from seat ${rejected.from} was refused: it ${rejected.explanation}. It stays pending; ack it to drop it.`,
    );
    this.name = "DuetE2eError";
  }
}

/**
 * The text as it goes on the wire: sealed with the session's next sequence number in an
 * encrypted room (which advances the session), as is otherwise. Throws DuetError too_large
 * (status 400, before any request) when it cannot fit the relay's limit.
 */
export function textToSend(session: E2eSession | undefined, text: string): string {
  const bytes = Buffer.byteLength(text, "utf8");
  const limit = session ? session.maxTextBytes() : MAX_TEXT_BYTES;
  if (bytes > limit) {
    const where = session
      ? ` in this end-to-end encrypted room (its envelope must stay within ${MAX_TEXT_BYTES} bytes)`
      : "";
    throw new DuetError(
      "too_large",
      `The text is ${bytes} UTF-8 bytes; at most ${limit} fit${where}. ${ERRORS.too_large.remedy}`,
      { status: 400 },
    );
  }
  return session ? session.seal(text) : text;
}

/**
 * Opens each message of an encrypted room, in order: every field that carries text (the
 * protocol's MESSAGE_TEXT_FIELDS) decrypted, the others as they came; or the message refused,
 * with the reason and its fields that carry no text.
 */
export function openAll(session: E2eSession, messages: Message[]): (OpenedMessage | RejectedMessage)[] {
  return messages.map((message) => {
    const result: OpenedMessage = { ...message };
    let openedAny = false;
    for (const field of MESSAGE_TEXT_FIELDS) {
      const sealed = (message as Record<string, unknown>)[field];
      if (typeof sealed !== "string") continue;
      openedAny = true;
      const opened = session.open(message.id, sealed);
      if (!opened.ok) return { ...clearFields(message), reason: opened.reason, explanation: opened.explanation };
      (result as Record<string, unknown>)[field] = opened.text;
      result.seq = opened.seq;
      if (opened.missing) result.missing = opened.missing;
    }
    // A message with no sealed field at all was never authenticated: refused, not passed on.
    if (!openedAny)
      return { ...clearFields(message), reason: "malformed", explanation: E2E_REJECT_EXPLANATIONS.malformed };
    return result;
  });
}

/** A message without its fields that carry text: what a refused message still shows. */
function clearFields(message: Message): Omit<Message, MessageTextField> {
  return Object.fromEntries(Object.entries(message).filter(([name]) => !MESSAGE_TEXT_FIELDS.includes(name))) as Omit<
    Message,
    MessageTextField
  >;
}
