// `pnpm --filter @duet/bench longpoll [--seats N] [--seconds S] [--wait MS] [--clients C]
// [--env KEY=VALUE ...]`: N seats long-polling one relay (in-process store), every answer
// counted; nobody sends, so thousands of waits end together. Client processes are
// src/longpoll-client.ts. Prints one JSON line and exits 1 on any answer but a 200 or any
// drop. Runs on the Node that runs it (`PATH=/opt/node26:$PATH ...`). What it reports:
// packages/bench/README.md; figures: docs/performance.md.
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
