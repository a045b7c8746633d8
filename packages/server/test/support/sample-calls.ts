// A well-formed call of any operation of the endpoint table, made from its input schema and a
// room prepared for it: the table-driven tests (table-rules, round trips) call every operation
// this way, so a new entry of the table is exercised without a list of operations to extend.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { ENDPOINTS, type EndpointSpec, OPERATION_IDS, type OperationId, peerTextField } from "@duet/protocol";
import type { CallOptions, Reply, TestClient } from "./http-client";

/** The table's operations, as specs. */
export const TABLE: EndpointSpec[] = OPERATION_IDS.map((id) => ENDPOINTS[id] as EndpointSpec);

/** The call takes a room's code: it acts on a room that exists before it. */
export const takesCode = (spec: EndpointSpec): boolean => spec.input !== undefined && "code" in spec.input.schema.shape;

/**
 * A room ready for a call: for a call that creates rooms (join) only opened, else paired with
 * one message from a to b not acked yet (what recv finds, ack deletes, close is refused for).
 */
export interface SampleRoom {
  code: string;
  a: string;
  /** "" while the room is only opened. */
  b: string;
  /** The id of a's message to b, "" while the room is only opened. */
  pendingId: string;
}

/** A room for `spec` (see SampleRoom); `e2e` opens an end-to-end encrypted one. */
export async function sampleRoom(client: TestClient, spec: EndpointSpec, e2e = false): Promise<SampleRoom> {
  const opened = await client.call("POST", "/v1/open", { body: e2e ? { e2e: true } : {} });
  if (opened.status !== 200) throw new Error(`open failed: ${opened.status} ${opened.text}`);
  const room = { code: opened.body.code as string, a: opened.body.token as string, b: "", pendingId: "" };
  if (spec.createsRoom) return room;
  const joined = await client.join(room.code);
  if (joined.status !== 200) throw new Error(`join failed: ${joined.status} ${joined.text}`);
  room.b = joined.body.token;
  const sent = await client.send(room.code, room.a, e2e ? sampleEnvelope() : "pending for b");
  if (sent.status !== 200) throw new Error(`send failed: ${sent.status} ${sent.text}`);
  room.pendingId = sent.body.id;
  return room;
}

/** A text of an envelope's shape (the relay checks nothing more): what an encrypted room takes. */
export const sampleEnvelope = (): string =>
  `duet-e2e:v1:${randomBytes(16).toString("base64")}:${randomBytes(12).toString("base64")}:${randomBytes(32).toString("base64")}`;

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  minimum?: number;
  minLength?: number;
}

/** A value of a field's type, for a required field the tests give no meaning to. */
function valueOfType(schema: JsonSchema): unknown {
  if (schema.enum) return schema.enum[0];
  if (schema.type === "integer" || schema.type === "number") return schema.minimum ?? 0;
  if (schema.type === "boolean") return false;
  if (schema.type === "array") return [];
  if (schema.type === "object") return {};
  return "x".repeat(Math.max(1, schema.minLength ?? 1));
}

/**
 * The input of a sample call: its required fields (the room's code, b's pending message for
 * ids, `text` for the peer text, a value of its type for any other), and `wait: 0` where the
 * call could wait, so that it never holds its answer. A query's values as strings.
 */
export function sampleInput(spec: EndpointSpec, room: SampleRoom, text: string): Record<string, unknown> | undefined {
  if (!spec.input) return undefined;
  const schema = z.toJSONSchema(spec.input.schema, { io: "input", unrepresentable: "any" }) as JsonSchema;
  const byName: Record<string, unknown> = { code: room.code, ids: [room.pendingId] };
  const textField = peerTextField(spec);
  if (textField !== undefined) byName[textField] = text;
  const input: Record<string, unknown> = {};
  for (const name of schema.required ?? [])
    input[name] = name in byName ? byName[name] : valueOfType(schema.properties?.[name] ?? {});
  if (schema.properties && "wait" in schema.properties) input.wait = 0;
  if (spec.input.in === "query")
    for (const [name, value] of Object.entries(input))
      input[name] = Array.isArray(value) ? value.join(",") : String(value);
  return input;
}

/**
 * Calls operation `id` on `room` with its sample input, as seat b (a's message is pending for
 * it); a call that creates rooms goes without a token. `text` is the peer text, if it carries one.
 */
export function sampleCall(
  client: TestClient,
  id: OperationId,
  room: SampleRoom,
  { text = "hello", ...options }: CallOptions & { text?: string } = {},
): Promise<Reply> {
  const spec = ENDPOINTS[id] as EndpointSpec;
  const input = sampleInput(spec, room, text);
  const token = spec.auth === "bearer" ? room.b : undefined;
  const placed = spec.input?.in === "query" ? { query: input as Record<string, string> } : { body: input ?? {} };
  return client.call(spec.method, spec.path, { ...placed, token, ...options });
}
