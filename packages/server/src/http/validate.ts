// Validation at the edge: a zod schema or a 400 bad_request naming the field.
import type { z } from "zod";
import { apiError } from "../errors.js";

export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  where: "body" | "query" | "arguments",
): z.output<S> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.join(".");
  let message: string;
  if (issue.code === "unrecognized_keys") {
    message = `Unknown field${issue.keys.length > 1 ? "s" : ""} in the ${where}: ${issue.keys.join(", ")}.`;
  } else if (issue.code === "invalid_type" && issue.path.length === 0) {
    message = `The ${where} must be a JSON object.`;
  } else if (issue.code === "invalid_type" && issue.message.endsWith("received undefined")) {
    message = `${field} is required (${issue.expected}).`;
  } else {
    message = `${field ? `${field}: ` : ""}${issue.message}`;
  }
  throw apiError("bad_request", message);
}
