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
// that has sent bytes of a request and had no whole request from them within headersTimeout
// is, the time counted from when the relay first saw those bytes. Suspects are judged again
// in the check phase (setImmediate), after the poll phase has read what was waiting, so a
// request that arrived during a stall is answered. A timed-out connection gets the
// catalogue's JSON 408 (protocol §10) and is closed.
//
// A connection that has sent nothing at all is idle, not slow: it is closed (the same 408)
// after idleTimeoutMs, the keep-alive timeout a connection idle after an answer gets, not
// after headersTimeout. Its clock cannot tell a slowloris from a client whose own event loop
// is busy between its connect() and its write(): 10,000 seats long-polling through one
// process's fetch (undici's pool opened new connections for the re-polls of a burst of
// answers, and the process's loop stalled 8 to 21 s, on Node 20, 24 and 26 alike) connected,
// were accepted, and wrote their whole request more than headersTimeout later; they were
// answered 408 before a byte of it arrived (thousands a run when a stall passed 20 s), and
// read that 408 as the answer to the request they then sent (`pnpm --filter @duet/bench
// longpoll --client fetch`, docs/performance.md). Holding a silent connection open costs no
// more than the idle kept-alive one any client gets by sending a request first, and slowloris
// (headers started, never finished) is still timed, from the first check that sees its bytes.
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { ERRORS } from "@duet/protocol";

export interface ConnectionCheckOptions {
  /** Longest a client may take to send a request's headers (slowloris). */
  headersTimeoutMs: number;
  /** Longest a request may take to arrive in full, headers and body. */
  requestTimeoutMs: number;
  /**
   * Longest a connection may stay open without sending a byte (408 then, as for a slow client);
   * the relay gives it the keep-alive timeout, what a connection idle after an answer gets.
   */
  idleTimeoutMs: number;
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
  /** Since when the connection owes us a request's headers: the first check that saw bytes of it. */
  owedSince?: number;
  /** When the connection was accepted: one that has sent nothing since is idle (idleTimeoutMs). */
  openedAt: number;
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

  // One listener for every socket and one for every response, `this` being the socket or the
  // response: no closure and once-wrapper per connection and per request (a waiting recv or a
  // stream would hold them for its whole life). On, not once: 'close' comes once. A state
  // no longer in the map (timed out, or its socket closed) is never read again.
  function forget(this: Socket): void {
    states.delete(this);
  }
  function answered(this: ServerResponse): void {
    const socket = this.req.socket;
    const state = states.get(socket);
    if (!state) return;
    state.inFlight--;
    if (state.inFlight === 0) {
      state.request = undefined;
      state.baseline = socket.bytesRead;
    }
  }
  server.on("connection", (socket: Socket) => {
    states.set(socket, { inFlight: 0, requestAt: 0, baseline: 0, openedAt: now() });
    socket.on("close", forget);
  });
  // After the app's own listener: the first "request" listener is the app (the bench reads it there).
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const state = states.get(req.socket);
    if (!state) return;
    state.inFlight++;
    state.request = req;
    state.requestAt = now();
    state.owedSince = undefined;
    res.on("close", answered);
  });

  const expired = (socket: Socket, state: ConnectionState, at: number): boolean => {
    if (state.inFlight > 0) {
      const request = state.request;
      return request !== undefined && !request.complete && at - state.requestAt > options.requestTimeoutMs;
    }
    if (state.owedSince === undefined) {
      if (socket.bytesRead <= state.baseline) {
        // Nothing of a request yet. After an answer: keepAliveTimeout's business (Node's). Fresh
        // (nothing ever read): idle too, for as long; its request, once it comes, is read whole.
        return socket.bytesRead === 0 && at - state.openedAt > options.idleTimeoutMs;
      }
      // Bytes of a request: the headers timeout runs from now, the first check to see them.
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
