// `pnpm --filter @duet/bench longpoll [--seats N] [--seconds S] [--wait MS] [--clients C]
// [--env KEY=VALUE ...]`: N seats long-polling one relay, every answer counted. One duet node
// with the in-process store (as `pnpm start`, no Redis), N/2 paired rooms opened on it, and C
// client processes (src/longpoll-client.ts, default one per 10,000 seats) holding every seat
// on a keep-alive connection of its own, looping `GET /v1/recv?wait=MS` (default 25,000) and
// re-polling as soon as each answer is read; nobody sends, so every answer is a wait that
// ended, and thousands end together. After the last seat is connected, the run lasts S
// seconds (default 80). Prints one JSON line: the answers by status and error code (a 408
// `request_timeout` with a JSON body is the relay's slow-client check, a 408 with no body
// Node's own), the connections dropped under an outstanding recv, the relay's own count of
// connections it closed for a timeout, and its event-loop delay. Exits 1 on any answer but
// a 200 or any drop.
//
// Node's version is the one running this script, for the relay and the clients alike: run it
// under another Node with `PATH=/opt/node26:$PATH pnpm --filter @duet/bench longpoll`.
// This machine allows a process 20,000 file descriptors: at most ~19,000 seats a relay.
import { fork, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { RelayClient, inBatches } from "./client.js";
import type { LongPollReport, LongPollRequest, LongPollSeat } from "./longpoll-client.js";
import { startServer, type ServerProcess } from "./processes.js";
import { sleep } from "./stats.js";
import { extraEnvFromArgs, option } from "./cli-args.js";

const extraEnv = extraEnvFromArgs();
const seats = Number(option("seats", "10000"));
const seconds = Number(option("seconds", "80"));
const waitMs = Number(option("wait", "25000"));
const clientKind = option("client", "raw") as "raw" | "fetch";
const clientCount = Number(option("clients", String(Math.max(1, Math.ceil(seats / 10_000)))));
const log = (line: string) => process.stderr.write(`[longpoll ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

class Client {
  readonly child: ChildProcess;
  private readonly waiting = new Map<string, (message: unknown) => void>();
  constructor() {
    this.child = fork(join(__dirname, "longpoll-client.js"), [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
    this.child.on("message", (message: { type: string }) => {
      const resolve = this.waiting.get(message.type);
      this.waiting.delete(message.type);
      resolve?.(message);
    });
  }
  next<T>(type: string): Promise<T> {
    return new Promise<T>((resolve) => this.waiting.set(type, resolve as (message: unknown) => void));
  }
  ask<T>(message: LongPollRequest, answer: string): Promise<T> {
    const reply = this.next<T>(answer);
    this.child.send(message);
    return reply;
  }
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

async function main(): Promise<void> {
  if (seats > 19_000) throw new Error(`${seats} seats: over the 20,000 file descriptors a relay process may hold`);
  const env: Record<string, string> = {
    PORT: "0",
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    RATE_LIMIT_REQUESTS: "0",
    RATE_LIMIT_ROOMS: "0",
    ROOMS_PER_IP: "0",
    // The load generator is one address standing for every seat.
    MAX_WAITERS_PER_CLIENT: "off",
    MAX_CONNECTIONS_PER_IP: "0",
    SHUTDOWN_DRAIN_SECONDS: "1",
    LOG_LEVEL: "info",
    ...extraEnv,
  };
  let relay: ServerProcess | undefined;
  const clients: Client[] = [];
  const end = () => {
    for (const client of clients) client.kill();
    if (relay) {
      try {
        process.kill(relay.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  };
  process.on("exit", end);
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.on(signal, () => {
      end();
      process.exit(130);
    });
  try {
    // No pinning: the relay and the clients share the machine's cores.
    relay = await startServer("relay", "duet-node.js", { env, cpu: "0-1" });
    log(`Node ${process.version}, relay ${relay.url}: opening ${Math.ceil(seats / 2)} rooms`);
    const setup = new RelayClient(relay.url, 32);
    const rooms = await inBatches(Math.ceil(seats / 2), 32, () => setup.room());
    await setup.close();
    const all: LongPollSeat[] = rooms.flat().slice(0, seats);
    for (let i = 0; i < clientCount; i++) clients.push(new Client());
    await Promise.all(clients.map((c) => c.next("ready")));
    const share = Math.ceil(all.length / clientCount);
    await Promise.all(
      clients.map((c, i) =>
        c.ask(
          {
            type: "start",
            url: relay!.url,
            seats: all.slice(i * share, (i + 1) * share),
            waitMs,
            concurrency: 200,
            client: clientKind,
          },
          "started",
        ),
      ),
    );
    await relay.metrics({ resetEld: true });
    log(`${all.length} seats connected; ${seconds} s of long-polls`);
    const reports = async () =>
      Promise.all(clients.map((c) => c.ask<{ report: LongPollReport }>({ type: "report" }, "report")));
    for (let left = seconds; left > 0; left -= 10) {
      await sleep(Math.min(10, left) * 1000);
      const now = await reports();
      const answers: Record<string, number> = {};
      for (const { report } of now)
        for (const [key, n] of Object.entries(report.answers)) answers[key] = (answers[key] ?? 0) + n;
      log(
        `${JSON.stringify(answers)} drops ${now.reduce((n, { report }) => n + report.drops, 0)}, client event-loop delay max ${Math.round(Math.max(...now.map(({ report }) => report.eldMaxMs)))} ms`,
      );
    }
    const final = await reports();
    const metrics = await relay.metrics();
    const answers: Record<string, number> = {};
    for (const { report } of final)
      for (const [key, n] of Object.entries(report.answers)) answers[key] = (answers[key] ?? 0) + n;
    const failed = Object.entries(answers)
      .filter(([key]) => key !== "200")
      .reduce((n, [, count]) => n + count, 0);
    const drops = final.reduce((n, { report }) => n + report.drops, 0);
    const result = {
      node: process.version,
      seats: all.length,
      seconds,
      waitMs,
      clients: clientCount,
      client: clientKind,
      answers,
      failed,
      drops,
      waitingAtEnd: final.reduce((n, { report }) => n + report.waiting, 0),
      relayWaitingAtEnd: metrics.waiting,
      relayTimedOut: metrics.timedOut,
      relayEldP99Ms: metrics.eldP99Ms,
      relayEldMaxMs: metrics.eldMaxMs,
      clientEldP99Ms: Math.max(...final.map(({ report }) => report.eldP99Ms)),
      clientEldMaxMs: Math.max(...final.map(({ report }) => report.eldMaxMs)),
      samples: final.flatMap(({ report }) => report.samples).slice(0, 10),
      env: extraEnv,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exitCode = failed > 0 || drops > 0 ? 1 : 0;
    for (const client of clients) client.child.send({ type: "stop" } satisfies LongPollRequest);
    await relay.stop();
  } finally {
    end();
  }
}

main().catch((error) => {
  process.stderr.write(`longpoll: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
