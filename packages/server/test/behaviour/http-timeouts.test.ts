// Slow-client timeouts (connection-checks.ts): a client that trickles its headers or its body
// is answered 408 request_timeout and closed, while a request that arrived whole is answered
// however long the relay's event loop was busy before reading it, and a long-poll is held
// for its whole wait past the headers timeout. The timeouts are small here (1 s headers, 2 s
// request, 2 s keep-alive, checked every 100 ms) so that the test drives the timing instead of
// waiting it out.
// On the in-process store only: this is the HTTP server's behaviour, the same on every store,
// and the stall must be the relay's own event loop (it runs in this process).
import { connect, type Socket } from "node:net";
import { forEachTarget, pairedRoomOn } from "../support/targets";

const HEADERS_TIMEOUT_MS = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A raw connection and everything it receives; resolves once the server has accepted it. */
async function rawConnection(url: string): Promise<{ socket: Socket; received: () => string; closed: () => boolean }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let received = "";
  let closed = false;
  socket.setEncoding("latin1");
  socket.on("data", (d: string) => (received += d));
  socket.on("error", () => undefined);
  socket.on("close", () => (closed = true));
  await new Promise((r) => socket.once("connect", r));
  // The server accepts it in its next poll phase.
  await sleep(50);
  return { socket, received: () => received, closed: () => closed };
}

const statsRequest = "GET /v1/stats HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n";

async function until(condition: () => boolean, maxMs: number): Promise<void> {
  for (const started = Date.now(); !condition() && Date.now() - started < maxMs; ) await sleep(20);
}

forEachTarget(
  (target) => {
    it("a request that arrived whole while the event loop was busy past the headers timeout is answered, not 408", async () => {
      const url = target().nodes[0]!.url;
      const fresh = await rawConnection(url);
      const reused = await rawConnection(url);
      reused.socket.write(statsRequest);
      await until(() => reused.received().includes("\r\n\r\n{"), 5000);
      expect(reused.received()).toMatch(/^HTTP\/1\.1 200 /);
      const answered = reused.received().length;
      // Both requests reach the relay's socket buffers, then its event loop is held (a burst
      // of answers, a long GC) for longer than the headers timeout before it reads them.
      fresh.socket.write(statsRequest);
      reused.socket.write(statsRequest);
      const stalled = Date.now();
      while (Date.now() - stalled < HEADERS_TIMEOUT_MS + 500) {
        // busy: nothing else runs
      }
      await until(() => fresh.received().includes("\r\n\r\n{") && reused.received().length > answered + 20, 5000);
      try {
        expect(fresh.received()).toMatch(/^HTTP\/1\.1 200 /);
        expect(reused.received().slice(answered)).toMatch(/^HTTP\/1\.1 200 /);
      } finally {
        fresh.socket.destroy();
        reused.socket.destroy();
      }
    });

    it("a long-poll is held for its whole wait, past the headers timeout, on a kept-alive connection", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (let i = 0; i < 2; i++) {
        const reply = await client.recv(room.code, room.b, HEADERS_TIMEOUT_MS * 2.5);
        expect(reply.status).toBe(200);
        expect(reply.body).toEqual({ messages: [] });
      }
    });

    it("a connection that trickles its headers gets 408 request_timeout (JSON) and is closed", async () => {
      const slow = await rawConnection(target().nodes[0]!.url);
      slow.socket.write("GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Slow: ");
      const trickle = setInterval(() => slow.socket.writable && slow.socket.write("a"), 100);
      try {
        await until(slow.closed, 15_000);
        expect(slow.closed()).toBe(true);
        expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
        const body = JSON.parse(slow.received().slice(slow.received().indexOf("\r\n\r\n") + 4));
        expect(body).toMatchObject({ error: "request_timeout" });
      } finally {
        clearInterval(trickle);
        slow.socket.destroy();
      }
    });

    // Silent is idle, not slow: closed after the keep-alive timeout (2 s here), not the headers
    // timeout, so a client whose own loop is busy between connect() and write() is answered.
    it("a connection that opens and sends nothing is closed after the keep-alive timeout", async () => {
      const idle = await rawConnection(target().nodes[0]!.url);
      try {
        await until(idle.closed, 15_000);
        expect(idle.closed()).toBe(true);
        expect(idle.received()).toMatch(/^HTTP\/1\.1 408 /);
      } finally {
        idle.socket.destroy();
      }
    });

    it("a request whose body trickles gets 408 request_timeout once the request timeout passes", async () => {
      const { room } = await pairedRoomOn(target);
      const slow = await rawConnection(target().nodes[0]!.url);
      slow.socket.write(
        `POST /v1/send HTTP/1.1\r\nHost: x\r\nUser-Agent: duet/0.1\r\nAuthorization: Bearer ${room.a}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"code":"${room.code}","text":"`,
      );
      const trickle = setInterval(() => slow.socket.writable && slow.socket.write("a"), 100);
      try {
        await until(slow.closed, 15_000);
        expect(slow.closed()).toBe(true);
        expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
      } finally {
        clearInterval(trickle);
        slow.socket.destroy();
      }
    });
  },
  {
    kinds: ["memory"],
    env: {
      HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      REQUEST_TIMEOUT_MS: "2000",
      CONNECTION_CHECK_INTERVAL_MS: "100",
      // What a connection that has sent nothing is given (connection-checks.ts).
      KEEP_ALIVE_TIMEOUT_SECONDS: "2",
    },
  },
);
