// One address cannot take a node's file descriptors (issue 36). The relay runs as its own
// process under `ulimit -n 2048` (prlimit), on the in-process store; one address
// (127.0.0.1) opens 2,100 idle connections, more than the node has descriptors, and another
// (127.0.0.2) then calls. Before the per-address bound the flood used up the descriptors and
// the node reset every connection it could not keep, the other client's included.
import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { spawnRelay, type RelayProcess } from "@duet/testkit";
import { USER_AGENT } from "@duet/protocol";

const MAIN_JS = join(__dirname, "../../dist/main.js");
const OPEN_FILES = 2048;
const FLOOD = 2100;
// MAX_CONNECTIONS_PER_IP's default (1,024) is more than half of what 2,048 descriptors leave
// (2,048 - 256): one address gets at most half of those.
const BOUND = Math.floor((OPEN_FILES - 256) / 2);

/** One call from `localAddress`: its status and body, or the error it failed with. */
function callFrom(
  url: string,
  localAddress: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(url);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port,
        localAddress,
        method,
        path,
        agent: false,
        headers: {
          "user-agent": USER_AGENT,
          ...(payload === undefined ? {} : { "content-type": "application/json", "content-length": payload.length }),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

describe(`one address holding ${FLOOD.toLocaleString("en")} idle connections to a node with ulimit -n ${OPEN_FILES}`, () => {
  let relay: RelayProcess | undefined;
  const flood: Socket[] = [];
  afterAll(async () => {
    for (const socket of flood) socket.destroy();
    await relay?.stop(Number.POSITIVE_INFINITY);
  });

  it("refuses that address past its bound, and every other client's calls succeed", async () => {
    relay = await spawnRelay({
      main: MAIN_JS,
      wrapper: ["prlimit", `--nofile=${OPEN_FILES}:${OPEN_FILES}`, "--"],
      env: { PATH: process.env.PATH!, LOG_LEVEL: "info", METRICS_CACHE_MS: "0" },
    });
    const { port } = new URL(relay.url);
    let refused = 0;
    const connected = Array.from({ length: FLOOD }, () => {
      const socket = connect({ host: "127.0.0.1", port: Number(port) });
      flood.push(socket);
      socket.setEncoding("latin1");
      let received = "";
      socket.on("data", (chunk: string) => {
        received += chunk;
        if (received.startsWith("HTTP/1.1 429 ")) refused++;
      });
      socket.on("error", () => undefined);
      return new Promise<void>((resolve) => socket.once("connect", resolve).once("close", resolve));
    });
    // Every flood connection is in the node's accept queue before the other client's.
    await Promise.all(connected);

    const health = await callFrom(relay.url, "127.0.0.2", "GET", "/healthz");
    expect(health.status).toBe(200);
    const opened = await callFrom(relay.url, "127.0.0.2", "POST", "/v1/open", {});
    expect(opened.status).toBe(200);
    const { code, token } = JSON.parse(opened.text) as { code: string; token: string };
    expect((await callFrom(relay.url, "127.0.0.3", "POST", "/v1/join", { code })).status).toBe(200);
    expect(token).toBeDefined();
    const metrics = await callFrom(relay.metricsUrl!, "127.0.0.2", "GET", "/metrics");
    expect(metrics.status).toBe(200);

    // The flood got its bound, and the rest were answered 429 and closed.
    const open = () => flood.filter((socket) => !socket.destroyed && socket.readyState === "open").length;
    while (refused < FLOOD - BOUND || open() > BOUND) await new Promise((r) => setTimeout(r, 50));
    expect({ refused, open: open() }).toEqual({ refused: FLOOD - BOUND, open: BOUND });
  });
});
