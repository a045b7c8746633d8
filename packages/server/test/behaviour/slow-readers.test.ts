// Clients that never read their answers (http/slow-readers.ts). Node keeps what the kernel
// has not taken for as long as the connection stays open; a 2 MiB text of control characters
// is a 12.6 MB recv answer. An answer not taken within SLOW_READER_TIMEOUT_MS is dropped with
// its connection, and a client holding more than CLIENT_UNSENT_BYTES_MAX untaken gets 429.
// Everything here waits on events (a socket's close, an answer's status), never on the clock.
import { once } from "node:events";
import net, { type Socket } from "node:net";
import { USER_AGENT } from "@duet/protocol";
import { forEachTarget, type RelayTarget, pairedRoomOn } from "../support/targets";

const BIG_TEXT = "\u0001".repeat(2 * 1024 * 1024);

// Each case moves several 12.6 MB answers: on a loaded 2-core machine that is more than
// Jest's 30 s (CI's Node 20 lane once ran out of it).
jest.setTimeout(120_000);

/** A raw connection that asks for path and then reads nothing; its socket on the node too. */
async function stalledCall(target: RelayTarget, path: string, token: string) {
  const relay = target.nodes[0]!;
  const { port } = new URL(relay.url);
  const accepted: Socket[] = [];
  const onConnection = (socket: Socket) => void accepted.push(socket);
  relay.server.on("connection", onConnection);
  const client = net.connect(Number(port), "127.0.0.1");
  client.pause();
  await once(client, "connect");
  client.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUser-Agent: ${USER_AGENT}\r\nAuthorization: Bearer ${token}\r\n\r\n`,
  );
  while (!accepted.some((socket) => socket.remotePort === client.localPort)) await new Promise((r) => setImmediate(r));
  relay.server.off("connection", onConnection);
  const onNode = accepted.find((socket) => socket.remotePort === client.localPort)!;
  return { client, onNode };
}

/** Reads the rest of the client's connection: how many bytes of the answer's body arrived, and its length. */
async function readAll(client: Socket): Promise<{ bodyBytes: number; contentLength: number }> {
  const chunks: Buffer[] = [];
  client.on("data", (chunk: Buffer) => {
    chunks.push(chunk);
    const all = Buffer.concat(chunks);
    const headEnd = all.indexOf("\r\n\r\n");
    const length = /content-length: *([0-9]+)/i.exec(all.subarray(0, Math.max(headEnd, 0)).toString());
    if (headEnd >= 0 && length && all.length - headEnd - 4 >= Number(length[1])) client.end();
  });
  const done = closed(client);
  client.resume();
  await done;
  const all = Buffer.concat(chunks);
  const headEnd = all.indexOf("\r\n\r\n");
  const length = /content-length: *([0-9]+)/i.exec(all.subarray(0, headEnd).toString());
  return { bodyBytes: all.length - headEnd - 4, contentLength: Number(length?.[1]) };
}

/** A socket's close, whatever error comes first (events.once would reject on an ECONNRESET). */
const closed = (socket: Socket) => new Promise<void>((resolve) => socket.once("close", () => resolve()));

async function roomWithBigMessage(target: RelayTarget) {
  const room = await target.client.pairedRoom();
  expect((await target.client.send(room.code, room.a, BIG_TEXT)).status).toBe(200);
  return room;
}

forEachTarget(
  (target) => {
    it("drops an answer its client does not take within SLOW_READER_TIMEOUT_MS, with its connection", async () => {
      const room = await roomWithBigMessage(target());
      const { client, onNode } = await stalledCall(target(), `/v1/recv?code=${room.code}&wait=0`, room.b);
      // Without the guard the node holds the rest of the answer for as long as the client stays.
      await closed(onNode);
      // What the client gets when it reads at last is a cut answer.
      const { bodyBytes, contentLength } = await readAll(client);
      expect(contentLength).toBeGreaterThan(12_000_000);
      expect(bodyBytes).toBeLessThan(contentLength);
    });

    it("leaves an ordinary exchange alone", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (let i = 0; i < 20; i++) {
        expect((await client.send(room.code, room.a, `hello ${i}`)).status).toBe(200);
        const got = await client.recv(room.code, room.b, 0);
        expect(got.status).toBe(200);
        expect(got.body.messages.map((m: { text: string }) => m.text)).toEqual([`hello ${i}`]);
        expect((await client.ack(room.code, room.b, [got.body.messages[0].id])).status).toBe(200);
      }
      expect((await client.close(room.code, room.a, false)).status).toBe(200);
    });
  },
  // CLIENT_UNSENT_BYTES_MAX 0: any answer left in the socket refuses the next call, so an
  // ordinary exchange passing shows its answers never linger.
  { kinds: ["memory", "redis"], env: { SLOW_READER_TIMEOUT_MS: "300", CLIENT_UNSENT_BYTES_MAX: "0" } },
);

forEachTarget(
  (target) => {
    it("refuses a client's calls with 429 while its unread answers pass CLIENT_UNSENT_BYTES_MAX, until they are read or dropped", async () => {
      const { client } = target();
      const big = await roomWithBigMessage(target());
      const other = await client.pairedRoom();
      const path = `/v1/recv?code=${big.code}&wait=0`;
      for (const drop of [false, true]) {
        const { client: stalled, onNode } = await stalledCall(target(), path, big.b);
        // Once the 12.6 MB answer has ended on the node, the same client's next call is refused.
        let refused = await client.recv(other.code, other.b, 0);
        while (refused.status === 200) refused = await client.recv(other.code, other.b, 0);
        expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 429, error: "rate_limited" });
        expect(refused.headers.get("content-type")).toMatch(/^application\/json/);
        expect(refused.body.message).toMatch(/not read/);
        expect(refused.headers.get("retry-after")).toBe("60");
        expect((await client.recv(other.code, other.b, 0)).status).toBe(429);
        if (drop) {
          stalled.destroy();
          await closed(onNode);
        } else {
          const { bodyBytes, contentLength } = await readAll(stalled);
          expect(bodyBytes).toBe(contentLength);
        }
        // 'finish' (all taken) or 'close' gives the bytes back: served again.
        let served = await client.recv(other.code, other.b, 0);
        while (served.status === 429) served = await client.recv(other.code, other.b, 0);
        expect(served.status).toBe(200);
      }
    });
  },
  {
    kinds: ["memory", "redis"],
    env: { SLOW_READER_TIMEOUT_MS: "60000", CLIENT_UNSENT_BYTES_MAX: String(1024 * 1024) },
  },
);
