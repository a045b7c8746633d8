// A relay process (the built server, dist/main.js) on a host of a test network
// (@duet/testkit netns.ts), reached by the test's clients from outside the network. The
// relay listens on port 8080 of its namespace; the same process also listens on a Unix
// socket and forwards each connection to that port, and the test process bridges a
// loopback port of its own to the socket. Clients' calls thus never cross the test
// network: a partition cuts the relay from Redis and the sentinels, never from its clients
// (a load balancer stops sending to a relay it cannot reach; what matters here is what a
// relay that clients can reach answers when Redis cannot be).
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { killOnExit, type TestNetwork } from "@duet/testkit";
import { waitUntilReady } from "./targets";

const MAIN_JS = join(__dirname, "../../dist/main.js");

/** Runs in the relay's namespace, before the relay itself: the Unix socket to port 8080. */
const FORWARDER = `
const net = require("node:net");
net.createServer((c) => {
  const u = net.connect(8080, "127.0.0.1");
  c.pipe(u).pipe(c);
  c.on("error", () => u.destroy());
  u.on("error", () => c.destroy());
}).listen(process.env.DUET_NETNS_SOCKET);
require(process.env.DUET_NETNS_MAIN);
`;

export interface NetRelay {
  host: string;
  /** http://127.0.0.1:<port>: the test process's bridge to the relay. */
  url: string;
  process: ChildProcess;
  /** The last lines the relay wrote (stdout and stderr). */
  logs(): string;
  stop(): Promise<void>;
}

export async function startNetRelay(net: TestNetwork, host: string, env: Record<string, string>): Promise<NetRelay> {
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run 'pnpm -r build' first`);
  const dir = mkdtempSync(join(tmpdir(), `duet-net-relay-${host}-`));
  const socket = join(dir, "http.sock");
  const child = net.spawn(host, process.execPath, ["-e", FORWARDER], {
    env: {
      PATH: process.env.PATH!,
      HOST: "0.0.0.0",
      PORT: "8080",
      DUET_NETNS_SOCKET: socket,
      DUET_NETNS_MAIN: MAIN_JS,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  killOnExit(child);
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString().split("\n").filter(Boolean));
    if (lines.length > 400) lines.splice(0, lines.length - 400);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);

  // The bridge: a loopback port in the test's own namespace, each connection piped to the socket.
  const sockets = new Set<Socket>();
  const bridge: Server = createServer((client) => {
    const upstream = connect(socket);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => bridge.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(bridge.address() as AddressInfo).port}`;

  const stop = async () => {
    await new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    });
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => bridge.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const deadline = Date.now() + 90_000; !existsSync(socket); await new Promise((r) => setTimeout(r, 50))) {
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(`relay on ${host} did not start:\n${lines.join("\n")}`);
    }
    await waitUntilReady(url).catch((error: Error) => {
      throw new Error(`${error.message}; its last lines:\n${lines.slice(-30).join("\n")}`);
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { host, url, process: child, logs: () => lines.join("\n"), stop };
}
