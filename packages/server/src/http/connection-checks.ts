// Slow-client timeouts (headersTimeout, requestTimeout) checked by the relay instead of
// Node's own connection sweep, and judged only after the I/O that was waiting has been read.
//
// Node's http server enforces both timeouts with one sweep every connectionsCheckingInterval
// (30 s): a timer that asks the parser's connection list which connections started a message
// more than headersTimeout ago without completing its headers, and answers each a bare 408
// (no body) and closes it. The timer runs in the event loop's timers phase, before the poll
// phase reads the sockets that became readable meanwhile. After a stall of the loop longer
// than headersTimeout (a burst of thousands of re-polls answered at once, a long GC), a
// connection whose request arrived complete during the stall is still listed as waiting for
// its headers, and is answered 408 before its bytes are read: on Node 20 and Node 24 alike
// (test/behaviour/http-timeouts.test.ts stalls the loop to show it).
//
// deferConnectionChecks turns Node's sweep off (headersTimeout and requestTimeout 0 on the
// server) and runs its own every intervalMs from what the server has told JavaScript: a
// connection with a request being answered is never a slow client (a long-poll or a stream
// may take minutes); one whose request body has not all arrived after requestTimeout is; one
// that has sent bytes of a next request (or, fresh, nothing yet) and had no request from them
// within headersTimeout is. Suspects are judged again in the check phase (setImmediate), after
// the poll phase has read what was waiting, so a request that arrived during a stall is
// answered. A timed-out connection gets the catalogue's JSON 408 (protocol §10) and is closed.
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { ERRORS } from "@duet/protocol";

export interface ConnectionCheckOptions {
  /** Longest a client may take to send a request's headers (slowloris). */
  headersTimeoutMs: number;
  /** Longest a request may take to arrive in full, headers and body. */
  requestTimeoutMs: number;
  /** How often connections are checked: a slow client is closed within its timeout plus this. */
  intervalMs: number;
  now?: () => number;
  /** Called once per connection closed for a timeout (the relay counts it in its error metric). */
  onTimeout?: () => void;
}

interface ConnectionState {
  /** Requests received and not yet answered (more than one when a client pipelines). */
  inFlight: number;
  /** The newest request received, and when. */
  request?: IncomingMessage;
  requestAt: number;
  /** socket.bytesRead when the last answer ended: more means a next request has begun. */
  baseline: number;
  /** Since when the connection owes us a request's headers (connect, or first sight of new bytes). */
  owedSince?: number;
}

const BODY = JSON.stringify({
  error: "request_timeout",
  message: ERRORS.request_timeout.message,
  remedy: ERRORS.request_timeout.remedy,
});
const ANSWER =
  "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n" +
  `Content-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`;

export interface ConnectionChecks {
  /** Runs one check now (tests drive it; the interval calls it otherwise). */
  check(): void;
  stop(): void;
  /** Connections closed for a timeout so far. */
  readonly timedOut: number;
  readonly options: ConnectionCheckOptions;
}

export function deferConnectionChecks(server: Server, options: ConnectionCheckOptions): ConnectionChecks {
  const now = options.now ?? Date.now;
  const states = new Map<Socket, ConnectionState>();
  let timedOut = 0;
  // Node's own sweep does nothing when both are 0 (checkConnections returns at once).
  server.headersTimeout = 0;
  server.requestTimeout = 0;

  server.on("connection", (socket: Socket) => {
    states.set(socket, { inFlight: 0, requestAt: 0, baseline: 0, owedSince: now() });
    socket.once("close", () => states.delete(socket));
  });
  // After the app's own listener: the first "request" listener is the app (the bench reads it there).
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const state = states.get(req.socket);
    if (!state) return;
    state.inFlight++;
    state.request = req;
    state.requestAt = now();
    state.owedSince = undefined;
    res.once("close", () => {
      state.inFlight--;
      if (state.inFlight === 0) {
        state.request = undefined;
        state.baseline = req.socket.bytesRead;
      }
    });
  });

  const expired = (socket: Socket, state: ConnectionState, at: number): boolean => {
    if (state.inFlight > 0) {
      const request = state.request;
      return request !== undefined && !request.complete && at - state.requestAt > options.requestTimeoutMs;
    }
    if (state.owedSince === undefined) {
      // Idle after an answer: keepAliveTimeout's business, unless a next request has begun.
      if (socket.bytesRead <= state.baseline) return false;
      state.owedSince = at;
    }
    return at - state.owedSince > options.headersTimeoutMs;
  };

  const timeOut = (socket: Socket) => {
    timedOut++;
    options.onTimeout?.();
    states.delete(socket);
    const answering = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    if (socket.writable && !answering?.headersSent) socket.end(ANSWER);
    socket.destroySoon();
    setTimeout(() => socket.destroy(), 1000).unref();
  };

  const check = () => {
    const suspects: Socket[] = [];
    const at = now();
    for (const [socket, state] of states) if (expired(socket, state, at)) suspects.push(socket);
    if (suspects.length === 0) return;
    // Judged again after the poll phase: what arrived while the loop was busy is read first.
    setImmediate(() => {
      const later = now();
      for (const socket of suspects) {
        const state = states.get(socket);
        if (state && expired(socket, state, later)) timeOut(socket);
      }
    });
  };
  const timer = setInterval(check, options.intervalMs).unref();
  return {
    check,
    stop: () => clearInterval(timer),
    options,
    get timedOut() {
      return timedOut;
    },
  };
}
