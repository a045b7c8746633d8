// Slow-client timeouts (headersTimeout, requestTimeout) checked by the relay instead of Node's
// connection sweep, which runs before the poll phase and so, after a stalled event loop,
// answered a bare 408 to requests that had arrived whole. Suspects are judged again after the
// waiting input is read; a request being answered is never timed out; a connection that sent
// nothing is idle (closed after idleTimeoutMs), not slow. docs/security.md, "Timeouts against
// slow clients"; test/behaviour/http-timeouts.test.ts.
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
