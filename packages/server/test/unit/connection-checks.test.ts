// The relay's slow-client check (http/connection-checks.ts) on a plain node:http server, its
// clock in the test's hands: every check is run by the test (check() and the poll phase after
// it), so each case waits for events (the server's connection, its request, bytes read, the
// answer, the close) and never for time.
//
// The first case is the state 10,000 seats long-polling through one process's fetch reached
// on Node 20 and 26 (`pnpm --filter @duet/bench longpoll --client fetch`): the client's own
// event loop, busy, wrote its request on a connection the relay had accepted more than the
// headers timeout earlier; the relay answered 408 to a connection that had sent nothing, and
// the client read that 408 as the answer to the whole request it then sent.
import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { connect, type Socket } from "node:net";
import { deferConnectionChecks, type ConnectionChecks } from "../../src/http/connection-checks";

const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2000; // the behaviour tests (http-timeouts) cover trickled bodies
const IDLE_TIMEOUT_MS = 5000;
const REQUEST = "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n";

let clock = 0;
let server: Server;
let checks: ConnectionChecks;
/** Requests held by the handler (GET /hold), answered when the test says. */
const held: ServerResponse[] = [];
const clients: Socket[] = [];

beforeEach(async () => {
  clock = 1_000_000;
  server = createServer((req, res) => {
    if (req.url === "/hold") held.push(res);
    else res.end("ok");
  });
  // A variable, not a literal: the same options run against a build without idleTimeoutMs.
  const options = {
    headersTimeoutMs: HEADERS_TIMEOUT_MS,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    // Never on its own: the test runs each check.
    intervalMs: 3_600_000,
    now: () => clock,
  };
  checks = deferConnectionChecks(server, options);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
});

afterEach(async () => {
  for (const client of clients.splice(0)) client.destroy();
  held.length = 0;
  checks.stop();
  server.closeAllConnections();
  server.close();
  await once(server, "close");
});

/** A raw client connection, once the server has it; `received` is all it was sent. */
async function open(): Promise<{ client: Socket; accepted: Socket; received: () => string }> {
  const accepted = once(server, "connection") as Promise<[Socket]>;
  const client = connect((server.address() as AddressInfo).port, "127.0.0.1");
  clients.push(client);
  let received = "";
  client.setEncoding("latin1");
  client.on("data", (data: string) => (received += data));
  client.on("error", () => undefined);
  const [socket] = await accepted;
  return { client, accepted: socket, received: () => received };
}

/** One check, then the poll phase and the re-judging after it (setImmediates run in order). */
async function judge(): Promise<void> {
  checks.check();
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Until `condition` holds or the client's connection is gone (a verdict the case then
 * reports), one turn of the event loop at a time: no clock involved.
 */
async function until(client: Socket, condition: () => boolean): Promise<void> {
  while (!condition() && !client.destroyed) await new Promise((resolve) => setImmediate(resolve));
}

/** A whole answer: its head, then the handler's "ok" or the 408's JSON. */
const answered = (received: () => string) => () => /\r\n\r\n(ok|\{.*\})$/s.test(received());

it("a connection whose client writes its whole request after the headers timeout (its own event loop busy) is answered, not 408", async () => {
  const { client, received } = await open();
  // The relay has held the connection, silent, past the headers timeout, and checked it.
  clock += HEADERS_TIMEOUT_MS * 3;
  await judge();
  clock += HEADERS_TIMEOUT_MS;
  await judge();
  client.write(REQUEST);
  await until(client, answered(received));
  expect(received()).toMatch(/^HTTP\/1\.1 200 /);
  expect(checks.timedOut).toBe(0);
});

it("a connection that sends nothing is answered 408 request_timeout and closed once the idle timeout passes", async () => {
  const { client, received } = await open();
  clock += IDLE_TIMEOUT_MS - 1;
  await judge();
  expect(checks.timedOut).toBe(0);
  clock += 2;
  const closed = once(client, "close");
  await judge();
  await closed;
  expect(received()).toMatch(/^HTTP\/1\.1 408 /);
  expect(JSON.parse(received().slice(received().indexOf("\r\n\r\n") + 4))).toMatchObject({
    error: "request_timeout",
  });
  expect(checks.timedOut).toBe(1);
});

it("headers started and never finished (slowloris) get 408 once the headers timeout passes from their first byte", async () => {
  const { client, accepted, received } = await open();
  // Silent for longer than the headers timeout first: that alone is no verdict.
  clock += HEADERS_TIMEOUT_MS * 2;
  await judge();
  client.write("GET /quick HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  await until(client, () => accepted.bytesRead > 0);
  await judge();
  clock += HEADERS_TIMEOUT_MS;
  await judge();
  expect(checks.timedOut).toBe(0);
  clock += 1;
  const closed = once(client, "close");
  await judge();
  await closed;
  expect(received()).toMatch(/^HTTP\/1\.1 408 /);
  expect(checks.timedOut).toBe(1);
});

it("the next request's headers started and never finished on a kept-alive connection get 408 too", async () => {
  const { client, accepted, received } = await open();
  client.write(REQUEST);
  await until(client, answered(received));
  const first = received().length;
  client.write("GET /quick HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  const before = accepted.bytesRead;
  await until(client, () => accepted.bytesRead > before);
  await judge();
  clock += HEADERS_TIMEOUT_MS + 1;
  const closed = once(client, "close");
  await judge();
  await closed;
  expect(received().slice(first)).toMatch(/^HTTP\/1\.1 408 /);
});

it("a request being answered (a long-poll) is never judged, whatever the clock says", async () => {
  const { client, received } = await open();
  client.write("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
  await until(client, () => held.length === 1);
  clock += IDLE_TIMEOUT_MS * 10;
  await judge();
  await judge();
  held[0]!.end("ok");
  await until(client, answered(received));
  expect(received()).toMatch(/^HTTP\/1\.1 200 /);
  expect(checks.timedOut).toBe(0);
  // And its re-poll, sent as the answer arrives, however late the relay looks at it.
  client.write("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
  clock += IDLE_TIMEOUT_MS * 10;
  await judge();
  await until(client, () => held.length === 2);
  await judge();
  expect(checks.timedOut).toBe(0);
  expect(client.destroyed).toBe(false);
});
