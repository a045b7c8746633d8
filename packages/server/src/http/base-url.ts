// The relay's public base URL, for the addresses its answers and pages print: PUBLIC_URL when
// set, else the request's own scheme and Host. A Host that is not a well-formed host[:port]
// is refused (400) rather than printed: it would land in the join address, the share block
// and the paste-ready shell lines of the pages.
//
// X-Forwarded-Host and X-Forwarded-Proto count only from a proxy TRUST_PROXY trusts (the
// connection's peer), and then only their rightmost value: the one that proxy appended.
// Express's req.host and req.protocol take the leftmost, which the client wrote
// (`X-Forwarded-Host: evil.example, relay.example` would print evil.example). An answer
// built from these headers says no shared cache may keep it (fromRequest below).
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

/** The last of a header's comma-separated values (the one the nearest proxy appended), trimmed. */
function rightmost(value: string | string[] | undefined): string | undefined {
  const joined = Array.isArray(value) ? value.join(",") : value;
  if (joined === undefined) return undefined;
  const last = joined.slice(joined.lastIndexOf(",") + 1).trim();
  return last === "" ? undefined : last;
}

/** The scheme and host a request was addressed to, forwarded ones only from a trusted proxy. */
export function requestOrigin(req: Request): { scheme: string; host: string } {
  const trust = req.app.get("trust proxy fn") as (address: string | undefined, hop: number) => boolean;
  const trusted = trust(req.socket.remoteAddress, 0);
  const own = "encrypted" in req.socket && req.socket.encrypted ? "https" : "http";
  const forwardedHost = trusted ? rightmost(req.headers["x-forwarded-host"]) : undefined;
  const forwardedProto = trusted ? rightmost(req.headers["x-forwarded-proto"])?.toLowerCase() : undefined;
  return { scheme: forwardedProto ?? own, host: forwardedHost ?? req.headers.host ?? "" };
}

/**
 * The base URL builder: PUBLIC_URL, or the request's scheme and Host once checked.
 * `fromRequest` says which: an answer that prints it must then be `private` or `no-store`.
 */
export function baseUrlFor(publicUrl: string | undefined): ((req: Request) => string) & { fromRequest: boolean } {
  if (publicUrl !== undefined) return Object.assign(() => publicUrl, { fromRequest: false });
  const fromRequest = (req: Request) => {
    const { scheme, host } = requestOrigin(req);
    if ((scheme !== "http" && scheme !== "https") || !isWellFormedHost(host)) {
      throw apiError(
        "bad_request",
        "The Host header is not a host name (host or host:port): this relay builds the addresses it answers from it. Set PUBLIC_URL to serve it under another.",
      );
    }
    return `${scheme}://${host}`;
  };
  return Object.assign(fromRequest, { fromRequest: true });
}
