// The parsers of config.ts's fields: each reads one environment variable's text into the
// value the code uses, or adds an issue that names what is wrong with it.
import { z } from "zod";

export const integer = (fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?[0-9]+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .optional()
    .transform((value) => value ?? fallback);

export const optionalText = z
  .string()
  .trim()
  .optional()
  .transform((value) => (value === "" ? undefined : value));

/** The metrics listener's port: a port (0: a free one), or "off". */
/** MAX_WAITERS: "auto" (from the memory and open-file limits), "off", or a count. */
export const maxWaiters = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx): number | "auto" | "off" => {
    if (value === undefined || value === "" || value === "auto") return "auto";
    if (value === "off") return "off";
    if (/^[0-9]{1,9}$/.test(value)) return Number(value);
    ctx.addIssue({ code: "custom", message: "must be auto, off or a number of waiting calls" });
    return z.NEVER;
  });

export const metricsPort = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx): number | false => {
    if (value === undefined || value === "") return 9464;
    if (value === "off") return false;
    const port = /^[0-9]{1,5}$/.test(value) ? Number(value) : Number.NaN;
    if (port <= 65535) return port;
    ctx.addIssue({ code: "custom", message: "must be a port (0..65535; 0 picks a free one) or off" });
    return z.NEVER;
  });

/** Express "trust proxy": false, a hop count, or a list of addresses/subnets. Never plain true. */
export const trustProxy = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx): false | number | string[] => {
    if (value === undefined || value === "" || value === "false" || value === "0") return false;
    if (/^[0-9]+$/.test(value)) return Number(value);
    if (value === "true") {
      ctx.addIssue({
        code: "custom",
        message:
          "'true' would trust any X-Forwarded-For a client sends; give the number of proxies in front (e.g. 1) or their addresses",
      });
      return z.NEVER;
    }
    return value
      .split(",")
      .map((part) => part.trim())
      .filter(Boolean);
  });

export interface HostPort {
  host: string;
  port: number;
}

const HOST_PORT = /^\s*([^\s:=,]+|\[[^\]]+\]):([0-9]{1,5})\s*$/;

/** "host:port" (an IPv6 host in brackets), or undefined. */
function parseHostPort(entry: string): HostPort | undefined {
  const match = HOST_PORT.exec(entry);
  if (!match || Number(match[2]) > 65535) return undefined;
  return { host: match[1]!.replace(/^\[|\]$/g, ""), port: Number(match[2]) };
}

/** A comma-separated list of host:port. */
export const hostPortList = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    if (!value) return undefined;
    return value.split(",").map((entry) => {
      const parsed = parseHostPort(entry);
      if (!parsed) ctx.addIssue({ code: "custom", message: `"${entry}" is not host:port` });
      return parsed ?? { host: "", port: 0 };
    });
  });

/**
 * Sentinel's NAT map: "reported=reachable,…", each side host:port. Sentinel reports the
 * addresses Redis nodes announce, which a client outside their network may not reach.
 */
export const natMap = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    if (!value) return undefined;
    const map: Record<string, HostPort> = {};
    for (const entry of value.split(",")) {
      const [from, to, extra] = entry.split("=");
      const reported = from === undefined ? undefined : parseHostPort(from);
      const reachable = to === undefined ? undefined : parseHostPort(to);
      if (!reported || !reachable || extra !== undefined) {
        ctx.addIssue({ code: "custom", message: `"${entry}" is not host:port=host:port` });
        continue;
      }
      map[`${reported.host}:${reported.port}`] = reachable;
    }
    return map;
  });

export const flag = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined || value === "" || value === "false" || value === "0") return false;
    if (value === "true" || value === "1") return true;
    ctx.addIssue({ code: "custom", message: "must be true or false" });
    return z.NEVER;
  });
