// One client process of the long-poll run (src/longpoll.ts): it holds its share of the seats,
// each on a keep-alive connection of its own looping `GET /v1/recv?wait=W` (the next one sent
// as soon as the answer has been read, as an agent's recv loop does), and counts every answer
// by status and error code. A 408 with the catalogue's JSON body (`request_timeout`) is the
// relay's own slow-client check (connection-checks.ts); a 408 with no body is Node's own
// sweep. Plain `net` sockets with a minimal reader, as in the scale run (src/seat-conn.ts):
// 10,000 of them cost this process little beside the relay it measures.
import { connect, type Socket } from "node:net";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { USER_AGENT } from "@duet/protocol";

export interface LongPollSeat {
  code: string;
  token: string;
}
export type LongPollRequest =
  | { type: "start"; url: string; seats: LongPollSeat[]; waitMs: number; concurrency: number; client: "raw" | "fetch" }
  | { type: "report" }
  | { type: "stop" };
export interface LongPollReport {
  /** Answers by `<status>` (200) or `<status> <error code>`; `408 (no body)` is Node's own 408. */
  answers: Record<string, number>;
  /** Connections closed by the relay (or broken) while a recv was outstanding. */
  drops: number;
  /** Seats whose recv is outstanding now. */
  waiting: number;
  samples: string[];
  /** This client process's own event-loop delay, max and p99 (ms): a client too busy to write its requests is a slow client. */
  eldMaxMs: number;
  eldP99Ms: number;
}

const send = (message: unknown) => process.send?.(message);
const report: LongPollReport = { answers: {}, drops: 0, waiting: 0, samples: [], eldMaxMs: 0, eldP99Ms: 0 };
const eld = monitorEventLoopDelay({ resolution: 10 });
eld.enable();
const conns: { start(): Promise<void>; close(): void }[] = [];
let stopping = false;

function count(key: string, sample?: string): void {
  report.answers[key] = (report.answers[key] ?? 0) + 1;
  if (sample && report.samples.length < 10) report.samples.push(sample);
}

class Seat {
  private socket?: Socket;
  private buffer = "";
  private outstanding = false;

  constructor(
    private readonly seat: LongPollSeat,
    private readonly host: string,
    private readonly port: number,
    private readonly waitMs: number,
  ) {}

  start(): Promise<void> {
    return new Promise((resolve) => {
      const socket = connect({ host: this.host, port: this.port, noDelay: true });
      this.socket = socket;
      this.buffer = "";
      socket.setEncoding("latin1");
      socket.on("connect", () => {
        this.request();
        resolve();
      });
      socket.on("data", (data: string) => this.read(data));
      socket.on("error", () => undefined);
      socket.on("close", () => {
        if (this.outstanding) {
          this.outstanding = false;
          report.waiting--;
          report.drops++;
        }
        resolve();
        // Again on a new connection, as a client would.
        if (!stopping) setTimeout(() => !stopping && void this.start(), 1000);
      });
    });
  }

  close(): void {
    this.socket?.destroy();
  }

  private request(): void {
    this.outstanding = true;
    report.waiting++;
    this.socket!.write(
      `GET /v1/recv?code=${this.seat.code}&wait=${this.waitMs} HTTP/1.1\r\nHost: ${this.host}:${this.port}\r\n` +
        `User-Agent: ${USER_AGENT}\r\nAuthorization: Bearer ${this.seat.token}\r\n\r\n`,
    );
  }

  private read(data: string): void {
    this.buffer += data;
    const end = this.buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    const head = this.buffer.slice(0, end);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    const bodyLength = length ? Number(length[1]) : 0;
    if (this.buffer.length < end + 4 + bodyLength) return;
    const body = this.buffer.slice(end + 4, end + 4 + bodyLength);
    this.buffer = this.buffer.slice(end + 4 + bodyLength);
    this.outstanding = false;
    report.waiting--;
    const status = Number(head.slice(9, 12));
    if (status === 200) count("200");
    else {
      let code = "(no body)";
      try {
        code = (JSON.parse(body) as { error?: string }).error ?? code;
      } catch {
        // not JSON: Node's own answer
      }
      count(`${status} ${code}`, `${new Date().toISOString()} ${status} ${code}`);
    }
    if (stopping) return;
    // A 408 (or any answer with Connection: close) ends the connection: the next recv goes on a new one.
    if (/\r\nconnection: *close/i.test(head)) this.socket?.destroy();
    else this.request();
  }
}

/**
 * One seat looping recv through this Node's own `fetch` (its bundled undici and global agent:
 * connections pooled per origin, reused by whichever call comes next), as the SDK and the
 * CLI call the relay.
 */
class FetchSeat {
  private readonly abort = new AbortController();
  constructor(
    private readonly seat: LongPollSeat,
    private readonly url: string,
    private readonly waitMs: number,
  ) {}

  start(): Promise<void> {
    return new Promise((resolve) => void this.loop(resolve));
  }

  close(): void {
    this.abort.abort();
  }

  private async loop(started: () => void): Promise<void> {
    const headers = {
      "User-Agent": USER_AGENT,
      Accept: "application/json",
      Authorization: `Bearer ${this.seat.token}`,
    };
    const url = `${this.url}/v1/recv?code=${this.seat.code}&wait=${this.waitMs}`;
    while (!stopping) {
      report.waiting++;
      try {
        const answer = fetch(url, { headers, signal: this.abort.signal });
        started();
        const response = await answer;
        const body = await response.text();
        report.waiting--;
        if (response.status === 200) count("200");
        else {
          let code = "(no body)";
          try {
            code = (JSON.parse(body) as { error?: string }).error ?? code;
          } catch {
            // not JSON: Node's own answer
          }
          count(`${response.status} ${code}`, `${new Date().toISOString()} ${response.status} ${code}`);
        }
      } catch (error) {
        report.waiting--;
        if (stopping) return;
        report.drops++;
        if (report.samples.length < 10)
          report.samples.push(`${new Date().toISOString()} ${String(error)} ${String((error as Error).cause)}`);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }
}

async function start(
  url: string,
  seats: LongPollSeat[],
  waitMs: number,
  concurrency: number,
  client: "raw" | "fetch",
): Promise<void> {
  const { hostname, port } = new URL(url);
  for (const seat of seats)
    conns.push(client === "fetch" ? new FetchSeat(seat, url, waitMs) : new Seat(seat, hostname, Number(port), waitMs));
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, conns.length) }, async () => {
      while (next < conns.length) await conns[next++]!.start();
    }),
  );
  send({ type: "started" });
}

process.on("message", (message: LongPollRequest) => {
  if (message.type === "start")
    void start(message.url, message.seats, message.waitMs, message.concurrency, message.client);
  else if (message.type === "report") {
    report.eldMaxMs = Math.max(0, eld.max / 1e6 - 10);
    report.eldP99Ms = Math.max(0, eld.percentile(99) / 1e6 - 10);
    send({ type: "report", report });
  } else if (message.type === "stop") {
    stopping = true;
    for (const conn of conns) conn.close();
    process.exit(0);
  }
});
process.on("disconnect", () => process.exit(0));
send({ type: "ready" });
