// Connections bounded so that no one address can take the node's file descriptors, both
// counted on 'connection' before any byte is read: per address (IPv6 by its /56), past
// `perAddress` a new one gets a 429 JSON answer and is closed (peers TRUST_PROXY trusts are
// exempt: the balancer bounds its clients); in all, at most `total` (net.Server's
// maxConnections), keeping descriptors for Redis, metrics and files. docs/security.md,
// "Per-client bounds".
import type { Server } from "node:http";
import type { Socket } from "node:net";
import { ipKeyGenerator } from "express-rate-limit";
import { ERRORS } from "@duet/protocol";
import { bareAddress } from "./client-address.js";

/** Descriptors kept back from the public listener: Redis, the metrics listener, files, the listen sockets. */
export const RESERVED_DESCRIPTORS = 256;

export interface ConnectionLimitOptions {
  /** Open connections one address may hold; 0: no bound. */
  perAddress: number;
  /** Open connections the server accepts in all; undefined: no bound. */
  total?: number;
  /** Whether a peer is a proxy TRUST_PROXY trusts (exempt from the per-address bound). */
  isTrustedProxy: (address: string) => boolean;
  /** Called once per connection refused for its address. */
  onRefused?: () => void;
}

/** The bounds a setting means under an open-file limit: one address never gets half of what is left. */
export function connectionBounds(
  perAddressSetting: number,
  openFiles: number | undefined,
): { perAddress: number; total?: number } {
  if (openFiles === undefined || !Number.isFinite(openFiles)) return { perAddress: perAddressSetting };
  const total = Math.max(1, openFiles - RESERVED_DESCRIPTORS);
  if (perAddressSetting === 0) return { perAddress: 0, total };
  return { perAddress: Math.max(1, Math.min(perAddressSetting, Math.floor(total / 2))), total };
}

const BODY = JSON.stringify({
  error: "rate_limited",
  message: "This address holds as many open connections to the relay as it may.",
  remedy: ERRORS.rate_limited.remedy,
});
const ANSWER =
  "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: application/json; charset=utf-8\r\n" +
  `Content-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`;

export interface ConnectionLimit {
  /** Connections refused for their address so far. */
  readonly refused: number;
  /** Open connections counted for an address (tests). */
  openFrom(address: string): number;
}

export function limitConnections(server: Server, options: ConnectionLimitOptions): ConnectionLimit {
  if (options.total !== undefined) server.maxConnections = options.total;
  const counts = new Map<string, number>();
  const keys = new WeakMap<Socket, string>();
  let refused = 0;
  const keyOf = (address: string) => ipKeyGenerator(bareAddress(address) ?? address);
  // One listener for every socket, `this` being the socket; 'close' comes once.
  function release(this: Socket): void {
    const key = keys.get(this);
    if (key === undefined) return;
    const left = (counts.get(key) ?? 1) - 1;
    if (left === 0) counts.delete(key);
    else counts.set(key, left);
  }
  if (options.perAddress > 0) {
    server.on("connection", (socket: Socket) => {
      const address = socket.remoteAddress;
      if (address === undefined || options.isTrustedProxy(address)) return;
      const key = keyOf(address);
      const open = counts.get(key) ?? 0;
      if (open >= options.perAddress) {
        refused++;
        options.onRefused?.();
        // The answer, then the descriptor back at once: a client that never reads or closes
        // must not hold it.
        socket.write(ANSWER, () => socket.destroy());
        return;
      }
      counts.set(key, open + 1);
      keys.set(socket, key);
      socket.on("close", release);
    });
  }
  return {
    get refused() {
      return refused;
    },
    openFrom: (address) => counts.get(keyOf(address)) ?? 0,
  };
}
