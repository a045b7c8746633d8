// The client's address, as the rate limits, ROOMS_PER_IP and the slow-reader budget count it
// (docs/protocol.md §10). Express takes it from X-Forwarded-For when TRUST_PROXY trusts the
// proxies in front (proxy-addr), and takes an entry as it is written: a proxy that writes
// `203.0.113.7:51234` (the client's port; Azure's gateway does), `[2001:db8::1]:443` or
// `unknown` would give every connection of one client a key of its own, a fresh budget per
// source port. Here an entry is reduced to the bare address (port and brackets stripped;
// IPv6 then counted per /56 by the limits' key), and a request whose forwarded client is no
// address at all is refused with a 400 rather than counted under a name anyone can vary.
import { isIP } from "node:net";
import type { Express, Request, RequestHandler } from "express";
import { apiError } from "../errors.js";

const IPV4_WITH_PORT = /^([0-9]{1,3}(?:\.[0-9]{1,3}){3}):[0-9]{1,5}$/;
const BRACKETED = /^\[([^\]]+)\](?::[0-9]{1,5})?$/;

/** The bare IP address an X-Forwarded-For entry (or a socket address) names, or undefined. */
export function bareAddress(entry: string): string | undefined {
  const trimmed = entry.trim();
  const address = BRACKETED.exec(trimmed)?.[1] ?? IPV4_WITH_PORT.exec(trimmed)?.[1] ?? trimmed;
  return isIP(address) ? address.toLowerCase() : undefined;
}

const NOT_AN_ADDRESS =
  "The client address forwarded in X-Forwarded-For is not an IP address (nor one with a port): the relay counts its limits per address. The proxy in front must append the client's address.";

/** Express's own req.ip getter (proxy-addr with the app's "trust proxy"), found on the prototype chain. */
function expressIpGetter(app: Express): (this: Request) => string | undefined {
  for (let proto: object | null = app.request; proto; proto = Object.getPrototypeOf(proto)) {
    const getter = Object.getOwnPropertyDescriptor(proto, "ip")?.get;
    if (getter) return getter as (this: Request) => string | undefined;
  }
  throw new Error("express request has no ip getter");
}

/**
 * Makes req.ip the bare address (for every request of `app`), and returns the middleware that
 * refuses a request whose trusted X-Forwarded-For names no address. Install it before any
 * limit.
 */
export function clientAddresses(app: Express, trustProxy: unknown): RequestHandler {
  const raw = expressIpGetter(app);
  Object.defineProperty(app.request, "ip", {
    configurable: true,
    enumerable: true,
    get(this: Request) {
      const ip = raw.call(this);
      return ip === undefined ? undefined : (bareAddress(ip) ?? ip);
    },
  });
  // Without a trusted proxy the address is the socket's, always an address.
  if (trustProxy === false) return (_req, _res, next) => next();
  return (req, _res, next) => {
    if (req.headers["x-forwarded-for"] === undefined) return next();
    const ip = raw.call(req);
    if (ip !== undefined && bareAddress(ip) === undefined) return next(apiError("bad_request", NOT_AN_ADDRESS));
    next();
  };
}
