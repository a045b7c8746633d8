// The per-address connection bound (http/connection-limit.ts): the bounds a setting means
// under an open-file limit, and a trusted proxy's connections never counted.
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { connectionBounds, limitConnections } from "../../src/http/connection-limit";

describe("connectionBounds", () => {
  it("keeps 256 descriptors back and gives one address at most half of the rest", () => {
    expect(connectionBounds(1024, 2048)).toEqual({ perAddress: 896, total: 1792 });
    expect(connectionBounds(1024, 65_536)).toEqual({ perAddress: 1024, total: 65_280 });
    expect(connectionBounds(1024, undefined)).toEqual({ perAddress: 1024 });
    expect(connectionBounds(0, 2048)).toEqual({ perAddress: 0, total: 1792 });
  });
});

describe("limitConnections", () => {
  let server: Server;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await new Promise((r) => server.close(r));
  });

  /** Opens n connections, once each is connected. */
  async function open(port: number, n: number): Promise<Socket[]> {
    const opened = Array.from({ length: n }, () => connect(port, "127.0.0.1"));
    sockets.push(...opened);
    await Promise.all(opened.map((s) => new Promise((r) => s.once("connect", r))));
    return opened;
  }

  async function listen(trusted: boolean) {
    server = createServer((_req, res) => res.end("ok"));
    const limit = limitConnections(server, { perAddress: 3, isTrustedProxy: () => trusted });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return { limit, port: (server.address() as { port: number }).port };
  }

  it("answers 429 and closes the connections past the bound; a closed one frees its place", async () => {
    const { limit, port } = await listen(false);
    const first = await open(port, 5);
    const refused = await Promise.all(
      first.slice(3).map(
        (s) =>
          new Promise<string>((resolve) => {
            let text = "";
            s.setEncoding("latin1").on("data", (d: string) => (text += d));
            s.once("close", () => resolve(text));
          }),
      ),
    );
    for (const text of refused) expect(text).toMatch(/^HTTP\/1\.1 429 [\s\S]*"error":"rate_limited"/);
    expect(limit.refused).toBe(2);
    expect(limit.openFrom("127.0.0.1")).toBe(3);
    first[0]!.destroy();
    // A place frees when the node sees the close.
    while (limit.openFrom("127.0.0.1") > 2) await new Promise((r) => setTimeout(r, 10));
    const [again] = await open(port, 1);
    const answer = await fetchOver(again!);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("does not count a proxy TRUST_PROXY trusts", async () => {
    const { limit, port } = await listen(true);
    const opened = await open(port, 6);
    for (const socket of opened) expect(await fetchOver(socket)).toMatch(/^HTTP\/1\.1 200 /);
    expect(limit.refused).toBe(0);
  });
});

/** One request on an open connection: the start of its answer. */
function fetchOver(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.setEncoding("latin1");
    socket.once("data", (d: string) => resolve(d));
    socket.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  });
}
