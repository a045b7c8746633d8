// A TCP proxy on loopback for fault injection between relay nodes and Redis (a small
// Toxiproxy in plain node:net): add latency, reset every connection, stop forwarding
// (a black hole: connections stay open, bytes are held like a partitioned TCP link that
// retransmits) and resume. Bytes are never dropped from a live connection: TCP does not
// lose bytes inside a connection, it delivers them late or the connection dies (resetAll).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, Socket, type AddressInfo, type Server } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";

export interface TcpProxy {
  port: number;
  url: string;
  /** Delay every chunk in both directions by this many ms (0: none). */
  setLatency(ms: number): void;
  /** Destroys every open connection with a TCP RST on both sides. */
  resetAll(): void;
  /** Black hole: accept connections and bytes but forward nothing, until resume(). */
  blackhole(): void;
  /** Forward again: held bytes are delivered in order (a healed partition). */
  resume(): void;
  /**
   * Black hole for one connection only: the one whose upstream side uses this local port
   * (what Redis shows as the client's addr in CLIENT LIST). Ended by resume().
   */
  blackholeConnection(upstreamLocalPort: number): boolean;
  /** Open client connections right now. */
  connectionCount(): number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  blackholed: boolean;
}

/** Starts a proxy from a free loopback port to 127.0.0.1:targetPort. */
export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let latencyMs = 0;
  let blackholed = false;

  // Chunks are forwarded in order; latency delays each one, a black hole holds them.
  const held: { to: Socket; chunk: Buffer }[] = [];
  const deliver = (pair: Pair, to: Socket, chunk: Buffer) => {
    if (blackholed || pair.blackholed) held.push({ to, chunk });
    else if (!to.destroyed) to.write(chunk);
  };
  // Each direction is a FIFO: a chunk never overtakes an earlier one, even when the
  // latency is lowered while chunks are in flight (TCP does not reorder bytes).
  const forward = (pair: Pair, from: Socket, to: Socket) => {
    const queue: { at: number; chunk: Buffer }[] = [];
    let _timer: NodeJS.Timeout | undefined;
    const pump = () => {
      _timer = undefined;
      while (queue.length > 0 && queue[0]!.at <= Date.now()) deliver(pair, to, queue.shift()!.chunk);
      if (queue.length > 0) _timer = setTimeout(pump, queue[0]!.at - Date.now());
    };
    from.on("data", (chunk: Buffer) => {
      if (latencyMs <= 0 && queue.length === 0) return deliver(pair, to, chunk);
      const after = queue.length > 0 ? queue[queue.length - 1]!.at : 0;
      queue.push({ at: Math.max(Date.now() + latencyMs, after), chunk });
      _timer ??= setTimeout(pump, Math.max(0, queue[0]!.at - Date.now()));
    });
  };

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const pair: Pair = { client, upstream, blackholed: false };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    // Connections made during a black hole hang (like a partitioned network), never refused.
    upstream.connect(targetPort, targetHost);
    upstream.setNoDelay(true);
    client.setNoDelay(true);
    forward(pair, client, upstream);
    forward(pair, upstream, client);
  });
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    setLatency: (ms) => {
      latencyMs = ms;
    },
    resetAll: () => {
      for (const { client, upstream } of [...pairs]) {
        client.resetAndDestroy();
        upstream.resetAndDestroy();
      }
      pairs.clear();
    },
    blackhole: () => {
      blackholed = true;
    },
    blackholeConnection: (upstreamLocalPort) => {
      const pair = [...pairs].find((p) => p.upstream.localPort === upstreamLocalPort);
      if (pair) pair.blackholed = true;
      return pair !== undefined;
    },
    resume: () => {
      blackholed = false;
      for (const pair of pairs) pair.blackholed = false;
      for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk);
    },
    connectionCount: () => pairs.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const { client, upstream } of pairs) {
          client.destroy();
          upstream.destroy();
        }
        pairs.clear();
        server.close(() => resolve());
      }),
  };
}

/**
 * A latency-only proxy as a process of its own (latency-proxy-process.mjs): for tests whose
 * verdict is about silence on the link, which an in-process proxy's timers would add whenever
 * the test's own event loop is held.
 */
export async function startLatencyProxyProcess(
  targetPort: number,
  latencyMs: number,
): Promise<{ url: string; close(): Promise<void> }> {
  const child = spawn(
    process.execPath,
    [join(__dirname, "latency-proxy-process.mjs"), String(targetPort), String(latencyMs)],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
  const port = Number(/^port (\d+)$/.exec(line)?.[1]);
  return {
    url: `redis://127.0.0.1:${port}`,
    close: async () => {
      if (child.exitCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    },
  };
}
