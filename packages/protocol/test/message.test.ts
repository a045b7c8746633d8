// The delivered message's one declaration (src/message.ts) and the rule for fields that carry
// peer text: each is marked, and each admits its envelope, however short its text, so that an
// encrypted room can carry it (CONTRIBUTING.md, "A new field on every delivered message").
import { randomBytes } from "node:crypto";
import { z } from "zod";
import {
  E2E_ENVELOPE_PREFIX,
  ENDPOINTS,
  MESSAGE_TEXT_FIELDS,
  Message,
  OPERATION_IDS,
  RecvResponse,
  STREAM_EVENTS,
  carriesText,
  e2eEnvelopeLength,
  e2eFieldLimit,
  isE2eEnvelope,
  peerTextField,
  textFieldsOf,
  type EndpointSpec,
} from "../src/index";

/** An envelope of the right shape sealing `bytes` bytes of text with the longest sequence line. */
const envelopeOf = (bytes: number) =>
  `${E2E_ENVELOPE_PREFIX}${randomBytes(16).toString("base64")}:${randomBytes(bytes + 17).toString("base64")}:${randomBytes(32).toString("base64")}`;

describe("the delivered message", () => {
  it("recv's answer and the stream's message event are the declaration itself", () => {
    expect(RecvResponse.shape.messages.element).toBe(Message);
    expect(STREAM_EVENTS.message).toBe(Message);
  });

  it("the fields that carry text are those the declaration marks", () => {
    expect(MESSAGE_TEXT_FIELDS).toEqual(textFieldsOf(Message));
    expect(MESSAGE_TEXT_FIELDS).toContain("text");
    const extended = Message.extend({ subject: carriesText(z.string()), sent_at: z.string() });
    expect(textFieldsOf(extended)).toEqual([...MESSAGE_TEXT_FIELDS, "subject"]);
  });
});

describe("a field that carries peer text admits its envelope, however short its text", () => {
  const inputs = OPERATION_IDS.flatMap((id) => {
    const spec = ENDPOINTS[id] as EndpointSpec;
    const field = peerTextField(spec);
    return field === undefined ? [] : [[`${id}'s ${field}`, spec.input!.schema.shape[field] as z.ZodType] as const];
  });
  const delivered = MESSAGE_TEXT_FIELDS.map(
    (field) => [`a message's ${field}`, Message.shape[field as "text"]] as const,
  );

  it.each([...inputs, ...delivered])("%s", (_name, field) => {
    const envelope = envelopeOf(1);
    expect(isE2eEnvelope(envelope)).toBe(true);
    expect(field.safeParse(envelope).success).toBe(true);
  });

  it("e2eFieldLimit sizes a short field for the envelope of its longest text", () => {
    const subject = carriesText(z.string().max(e2eFieldLimit(8)));
    expect(subject.safeParse(envelopeOf(8)).success).toBe(true);
    expect(subject.safeParse(envelopeOf(11)).success).toBe(false); // the next length an envelope can have
    // The table-rules tests' sample envelope (12 bytes of ciphertext) fits the shortest field.
    expect(e2eFieldLimit(1)).toBeGreaterThanOrEqual(e2eEnvelopeLength(12));
  });
});
