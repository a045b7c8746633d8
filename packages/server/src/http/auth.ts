// Bearer seat tokens. The token is hashed here, once; only the hash reaches the store (the
// operations also see the token itself, to refuse a text that contains it).
import type { Request } from "express";
import { apiError } from "../errors.js";
import { hashSeatToken } from "../store/credentials.js";

// The scheme is case-insensitive, as HTTP defines it.
const BEARER = /^bearer[ \t]+([^\s]+)[ \t]*$/i;

/** The request's seat token; 401 when it carries none. */
export function seatToken(req: Request): string {
  const header = req.get("authorization");
  const match = header === undefined ? null : BEARER.exec(header);
  if (!match)
    throw apiError(
      "unauthorized",
      "Missing seat token: send 'Authorization: Bearer <token>' with the token from open or join.",
    );
  return match[1]!;
}

/** The SHA-256 of the request's seat token; 401 when it carries none. */
export const seatTokenHash = (req: Request): string => hashSeatToken(seatToken(req));
