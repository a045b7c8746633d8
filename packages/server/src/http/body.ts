// JSON bodies: sized so that any legal text fits whatever escaping the client used, and
// refused (never silently repaired) when they are not valid UTF-8.
import { isUtf8 } from "node:buffer";
import express, { type RequestHandler } from "express";
import { MAX_BODY_BYTES } from "@duet/protocol";
import { apiError } from "../errors.js";

class InvalidUtf8 extends Error {}

export const jsonBody: RequestHandler = express.json({
  limit: MAX_BODY_BYTES,
  // Agents often forget the Content-Type; the body is JSON whatever it says.
  type: () => true,
  verify: (_req, _res, buffer) => {
    if (!isUtf8(buffer)) throw new InvalidUtf8();
  },
});

/** body-parser's errors, as the catalogue's. */
export function bodyParserError(error: unknown) {
  const type = (error as { type?: string }).type;
  if (error instanceof InvalidUtf8 || type === "entity.verify.failed")
    return apiError("bad_request", "The body is not valid UTF-8.");
  if (type === "entity.too.large") return apiError("too_large", `The body is larger than ${MAX_BODY_BYTES} bytes.`);
  if (type === "entity.parse.failed") return apiError("bad_request", "The body is not valid JSON.");
  if (type === "encoding.unsupported" || type === "charset.unsupported")
    return apiError("bad_request", "Send the body as UTF-8 JSON, uncompressed or gzip.");
  if (type === "request.aborted" || type === "request.size.invalid")
    return apiError("bad_request", "The body ended early.");
  // A body that does not decompress (Content-Encoding: gzip, br or deflate over other bytes)
  // comes as zlib's own error, which body-parser marks as a client error (400).
  if ((error as { status?: number }).status === 400 && (error as { expose?: boolean }).expose === true) {
    return apiError("bad_request", "The body could not be decoded: check its Content-Encoding.");
  }
  return undefined;
}
