// Validation at the edge: a zod schema or a 400 bad_request naming the field. What the client
// sent is never echoed at length: an unknown field's name comes back cut to a few characters
// (a seat token sent as a field name must not come back whole), and at most three of them.
import type { z } from "zod";
import { apiError } from "../errors.js";

/** Longest part of a name the client sent that an error repeats. */
export const ECHO_CHARACTERS = 16;
/** Most unknown names an error lists. */
const LISTED = 3;

/** A name the client sent, as an error may repeat it: printable ASCII, at most ECHO_CHARACTERS of it. */
export function echoName(name: string): string {
  const printable = name.slice(0, ECHO_CHARACTERS + 1).replace(/[^\x20-\x7e]/g, "?");
  return printable.length > ECHO_CHARACTERS ? `${printable.slice(0, ECHO_CHARACTERS)}…` : printable;
}

/** "a, b and 12 more", each name cut by echoName. */
export function echoNames(names: readonly string[]): string {
  const shown = names.slice(0, LISTED).map(echoName).join(", ");
  return names.length > LISTED ? `${shown} and ${names.length - LISTED} more` : shown;
}

export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  where: "body" | "query" | "arguments",
): z.output<S> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.map((part) => echoName(String(part))).join(".");
  let message: string;
  if (issue.code === "unrecognized_keys") {
    message = `Unknown field${issue.keys.length > 1 ? "s" : ""} in the ${where}: ${echoNames(issue.keys)}.`;
  } else if (issue.code === "invalid_type" && issue.path.length === 0) {
    message = `The ${where} must be a JSON object.`;
  } else if (issue.code === "invalid_type" && issue.message.endsWith("received undefined")) {
    message = `${field} is required (${issue.expected}).`;
  } else {
    message = `${field ? `${field}: ` : ""}${issue.message}`;
  }
  throw apiError("bad_request", message);
}
