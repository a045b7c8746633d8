// The delivered message: the one declaration of its fields. recv's answer, the stream's
// `message` event, the MCP recv tool's result and its output schema, the OpenAPI document and
// the SDK's types, decoders, stream parser and encrypted-room opening are all made from
// `Message` (schemas.ts derives the rest), so a field added here reaches each of them with no
// other edit. CONTRIBUTING.md, "A new field on every delivered message", says what else it needs.
import { z } from "zod";

export const Seat = z.enum(["a", "b"]).describe('"a" is the opener\'s seat, "b" the joiner\'s.');
export type Seat = z.infer<typeof Seat>;

// Decimal digits only, within the ids a room can reach: "-1", "1.5", "0x10" and " 7" are
// refused, not read as numbers by the store (until_read, after and Last-Event-ID say the same).
export const MessageId = z
  .string()
  .regex(/^[0-9]{1,15}$/, "a message id is 1 to 15 decimal digits")
  .describe(
    "Message id: decimal digits, unique within its room and larger for each later message (compare as numbers).",
  );

const TEXT_FIELDS = new WeakSet<z.ZodType>();
/** The mark carriesText leaves on a field's type (in types only), so that TextFieldName can see it. */
type Marked<T> = T & { readonly "~carriesText": true };

/**
 * Marks a field of a delivered message whose value the sending seat wrote (peer text): in an
 * end-to-end encrypted room it is a duet-e2e:v1 envelope, which the SDK opens (and refuses
 * when it does not authenticate). A field the relay sets (an id, a seat, a time) is not
 * marked: it travels in clear in every room. The rule for short values: CONTRIBUTING.md.
 */
export function carriesText<T extends z.ZodType>(field: T): Marked<T> {
  TEXT_FIELDS.add(field);
  return field as Marked<T>;
}

/** The names of the fields of `S` marked with carriesText, as a type. */
export type TextFieldName<S extends z.ZodObject> = {
  [K in keyof S["shape"]]: S["shape"][K] extends { readonly "~carriesText": true } ? K : never;
}[keyof S["shape"]];

/** The fields of `schema` marked with carriesText, in declaration order. */
export function textFieldsOf(schema: z.ZodObject): string[] {
  return Object.entries(schema.shape).flatMap(([name, field]) => (TEXT_FIELDS.has(field as z.ZodType) ? [name] : []));
}

/** A message as recv returns it and a stream's `message` event carries it (docs/protocol.md §6.2, §6.5). */
export const Message = z.object({ id: MessageId, from: Seat, text: carriesText(z.string()) });
export type Message = z.infer<typeof Message>;
/** The fields of a message that carry peer text ("text"). */
export type MessageTextField = TextFieldName<typeof Message>;
