// At most PER_TURN requests started per client address per turn of the event loop: Node starts
// every request of a socket's buffer at once, so one address pipelining could fill every turn.
// The rest wait in the address's queue, in order, and each check phase starts PER_TURN more of
// every queue; an address with nothing queued starts at once. Peers TRUST_PROXY trusts are not
// queued. docs/security.md, "Per-client bounds".
import type { RequestHandler } from "express";
import { ipKeyGenerator } from "express-rate-limit";
import { bareAddress } from "./client-address.js";

/** Requests one address starts per turn of the event loop. */
export const PER_TURN = 16;

export function fairTurns(isTrustedProxy: (address: string) => boolean, perTurn = PER_TURN): RequestHandler {
  // Requests started this turn, and those waiting, by address.
  const started = new Map<string, number>();
  const queues = new Map<string, (() => void)[]>();
  let scheduled = false;
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(turn);
  };
  function turn(): void {
    scheduled = false;
    started.clear();
    for (const [key, queue] of queues) {
      const count = Math.min(perTurn, queue.length);
      started.set(key, count);
      for (const start of queue.splice(0, count)) start();
      if (queue.length === 0) queues.delete(key);
    }
    // A turn with starts: the next one counts afresh.
    if (started.size > 0) schedule();
  }
  return (req, _res, next) => {
    const address = req.socket.remoteAddress;
    if (address === undefined || isTrustedProxy(address)) return next();
    const key = ipKeyGenerator(bareAddress(address) ?? address);
    const queue = queues.get(key);
    const count = started.get(key) ?? 0;
    schedule();
    if (queue === undefined && count < perTurn) {
      started.set(key, count + 1);
      return next();
    }
    if (queue) queue.push(next);
    else queues.set(key, [next]);
  };
}
