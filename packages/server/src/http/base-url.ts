// The relay's public base URL, for the addresses its answers and pages print: PUBLIC_URL when
// set, else the request's own scheme and Host. A Host that is not a well-formed host[:port]
// is refused (400) rather than printed: it would land in the join address, the share block
// and the paste-ready shell lines of the pages.
import type { Request } from "express";
import { apiError } from "../errors.js";

// A DNS name (letters, digits, hyphens and underscores; dots between labels), an IPv4 address, or an IPv6
// address in brackets; then an optional port. Nothing else: no spaces, quotes, semicolons,
// slashes, user info or percent signs.
const LABEL = "[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?";
const HOST = new RegExp(`^(?:${LABEL}(?:\\.${LABEL})*\\.?|\\[[0-9a-f:.]{2,45}\\])(?::([0-9]{1,5}))?$`, "i");

export function isWellFormedHost(host: string): boolean {
  const match = host.length <= 261 ? HOST.exec(host) : null;
  return match !== null && (match[1] === undefined || Number(match[1]) <= 65535);
}

/** The base URL builder: PUBLIC_URL, or the request's scheme and Host once checked. */
export function baseUrlFor(publicUrl: string | undefined): (req: Request) => string {
  if (publicUrl !== undefined) return () => publicUrl;
  return (req) => {
    const host = req.host ?? "";
    const scheme = req.protocol;
    if ((scheme !== "http" && scheme !== "https") || !isWellFormedHost(host)) {
      throw apiError(
        "bad_request",
        "The Host header is not a host name (host or host:port): this relay builds the addresses it answers from it. Set PUBLIC_URL to serve it under another.",
      );
    }
    return `${scheme}://${host}`;
  };
}
