// The User-Agent policy of the room endpoints (docs/protocol.md §3.2): library defaults and empty
// values get 403, so that every client identifies itself as duet/<version>.
import type { RequestHandler } from "express";
import { apiError } from "../errors.js";

/** Product tokens of generic HTTP libraries and tools, matched anywhere, case-insensitively. */
export const LIBRARY_USER_AGENTS = [
  "curl",
  "wget",
  "python-requests",
  "python-urllib",
  "aiohttp",
  "httpx",
  "axios",
  "node-fetch",
  "undici",
  "node",
  "got",
  "go-http-client",
  "okhttp",
  "java",
  "apache-httpclient",
  "libwww-perl",
  "postmanruntime",
  "insomnia",
];

// A token counts anywhere in the value as a whole word ("python-httpx/0.27" is httpx,
// "Python/3.11 aiohttp/3.9" is aiohttp) but not inside a longer word ("nodejs", "gotham").
const LIBRARY_PATTERN = new RegExp(
  `(?:^|[^a-z0-9])(?:${LIBRARY_USER_AGENTS.map((t) => t.replace(/-/g, "\\-")).join("|")})(?:$|[^a-z0-9])`,
  "i",
);

export type UserAgentPolicy = "denylist" | "off" | "strict";

export function isUserAgentAllowed(userAgent: string | undefined, policy: UserAgentPolicy): boolean {
  if (policy === "off") return true;
  const value = (userAgent ?? "").trim();
  if (/^duet\//i.test(value)) return true;
  if (policy === "strict") return false;
  return value !== "" && !LIBRARY_PATTERN.test(value);
}

export function userAgentPolicy(policy: UserAgentPolicy): RequestHandler {
  return (req, _res, next) => {
    if (isUserAgentAllowed(req.get("user-agent"), policy)) return next();
    next(
      apiError(
        "forbidden",
        policy === "strict"
          ? "Only duet clients are accepted here: send 'User-Agent: duet/0.1'."
          : "Generic library User-Agents are refused: send 'User-Agent: duet/0.1'.",
      ),
    );
  };
}
