// A node that shuts down drains what it is serving, and nothing else holds it: a connection
// that has not sent a single byte a second into the shutdown (a client's or a load
// balancer's spare, opened ahead of use) is no request in flight. Node's
// closeIdleConnections leaves such a socket open, and the drain then waited
// SHUTDOWN_DRAIN_SECONDS for it, ending with `drained: false`.
import { type Socket, connect } from "node:net";
import { startTarget } from "../support/targets";

const connected = (url: string) =>
  new Promise<Socket>((resolve, reject) => {
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname, () => resolve(socket)).once("error", reject);
  });

describe("shutdown", () => {
  it("drains at once when the only open connections never sent a request, and closes them", async () => {
    const target = await startTarget("memory", { SHUTDOWN_DRAIN_SECONDS: "20" });
    const spares = await Promise.all([0, 1, 2].map(() => connected(target.nodes[0]!.url)));
    const closedByServer = spares.map(
      (socket) => new Promise<void>((resolve) => socket.once("close", () => resolve())),
    );
    // Also one connection that did make a request: idle keep-alive, closed as before.
    expect((await target.client.stats()).status).toBe(200);
    await target.close();
    await Promise.all(closedByServer);
    const stopped = target
      .logs()
      .split("\n")
      .filter((line) => line.includes('"msg":"stopped"'));
    expect(stopped.map((line) => JSON.parse(line).drained)).toEqual([true]);
  }, 120_000);
});
