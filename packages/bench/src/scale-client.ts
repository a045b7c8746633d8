// One client process of the scale run (src/scale.ts): it holds its share of the seats, each
// on a socket of its own (`GET /v1/stream` held open, or `GET /v1/recv?wait=25000` looped on
// a keep-alive connection), sends the message load for the rooms it was given, times each
// message from its send to its event (send and receive may be in different processes: the
// times are the machine's clock, `performance.timeOrigin + performance.now()`), and acks
// what it receives. It talks to the orchestrator over IPC only.
//
// The seats' connections are plain `net` sockets with a minimal HTTP/1.1 reader, not undici:
// ~17,000 of them per process, and the load generator shares two cores with the relays
// under test, so each costs as little memory and CPU as possible. The sockets are not bound
// to a source address (`localAddress`): a bind() to port 0 searches the ephemeral range
// against every port in use and took 5 ms a call at 10,000 sockets (the kernel's time, 73 %
// of the machine), while connect() picks a port per destination, and one node's ≤ 19,000
// seats fit in the 28,000 ports of 127.0.0.1 (`localAddress` stays possible for more).
import { connect, type Socket } from "node:net";
import { USER_AGENT } from "@duet/protocol";
import { RelayClient } from "./client.js";
import { sleep } from "./stats.js";

export interface ScaleSeat {
  code: string;
  token: string;
  /** Index into the nodes list. */
  node: number;
  room: number;
}

export type ClientRequest =
  | { type: "rooms"; count: number; nodeUrls: string[] }
  | { type: "seats"; mode: "stream" | "long-poll"; nodeUrls: string[]; localAddress?: string; seats: ScaleSeat[] }
  | { type: "connect"; concurrency: number }
  | { type: "status" }
  | { type: "load"; rooms: number[]; seconds: number; intervalMs: number }
  | { type: "report" }
  | { type: "stop" };

export interface ClientStatus {
  /** Seats whose stream is open (first byte received) or whose recv is sent and not answered with an error. */
  open: number;
  connectErrors: number;
  /** Errors after connecting: a stream that ended or broke, a recv answered with an error, a socket closed. */
  drops: number;
  /** The first few error descriptions, for the report. */
  errorSamples: string[];
  /** ms from `connect` until every seat was open, once it was. */
  connectedMs?: number;
  rssMb: number;
}

export interface LoadReport {
  sent: number;
  sendErrors: number;
  /** Messages received by this process's seats during the load, each with its send → event latency (ms). */
  latencies: number[];
  received: number;
  duplicates: number;
  acked: number;
  ackErrors: number;
  status: ClientStatus;
}

const send = (message: unknown) => process.send?.(message);
const now = () => performance.timeOrigin + performance.now();

let mode: "stream" | "long-poll" = "stream";
let nodeUrls: string[] = [];
let localAddress: string | undefined;
let seats: ScaleSeat[] = [];
let stopping = false;
const status: ClientStatus = { open: 0, connectErrors: 0, drops: 0, errorSamples: [], rssMb: 0 };
const latencies: number[] = [];
const seen = new Set<string>();
let received = 0;
let duplicates = 0;
let acked = 0;
let ackErrors = 0;
let sent = 0;
let sendErrors = 0;
const pools = new Map<number, RelayClient>();
const conns: SeatConn[] = [];

function noteError(kind: "connect" | "drop", detail: string): void {
  if (kind === "connect") status.connectErrors++;
  else status.drops++;
  if (status.errorSamples.length < 10) status.errorSamples.push(`${kind}: ${detail}`);
}

function pool(node: number): RelayClient {
  let client = pools.get(node);
  if (!client) {
    client = new RelayClient(nodeUrls[node]!, 4);
    pools.set(node, client);
  }
  return client;
}

/** A message arrived for seat: time it (texts made by the load: "L <room> <seq> <sent at>"), then ack it. */
function arrived(seat: ScaleSeat, id: string, text: string, ackedInline = false): void {
  const key = `${seat.room}:${id}`;
  if (seen.has(key)) {
    duplicates++;
  } else {
    seen.add(key);
    received++;
    const parts = text.split(" ");
    if (parts[0] === "L") latencies.push(now() - Number(parts[3]));
  }
  if (ackedInline) return;
  pool(seat.node)
    .ack(seat, [id])
    .then(
      () => acked++,
      (error: Error) => {
        ackErrors++;
        if (status.errorSamples.length < 10) status.errorSamples.push(`ack: ${error.message}`);
      },
    );
}

/**
 * One seat's connection: a minimal HTTP/1.1 reader for the two answers it gets, a chunked
 * stream of NDJSON lines or a JSON body with a content length. latin1 keeps one character
 * per byte, so lengths count right (the bodies that matter are ASCII).
 */
class SeatConn {
  private socket?: Socket;
  private buffer = "";
  private statusCode = 0;
  private inBody = false;
  private chunked = false;
  private length = 0;
  private lines = "";
  private opened = false;
  private acking = false;
  private everOpen = false;
  /** This connection's failure is already counted (an error answer, an `end`): its close is not another. */
  private noted = false;
  private onReady?: () => void;

  constructor(
    private readonly seat: ScaleSeat,
    private readonly host: string,
    private readonly port: number,
  ) {}

  /** Connects and sends the first request; resolves once the stream's first byte (or the first recv) is on its way. */
  start(): Promise<void> {
    return new Promise((resolve) => {
      this.onReady = resolve;
      this.connectSocket();
    });
  }

  close(): void {
    this.socket?.destroy();
  }

  private connectSocket(): void {
    this.buffer = "";
    this.inBody = false;
    this.opened = false;
    this.acking = false;
    this.noted = false;
    const socket = connect({ host: this.host, port: this.port, localAddress, noDelay: true });
    this.socket = socket;
    socket.setEncoding("latin1");
    socket.on("connect", () => this.request());
    socket.on("data", (data: string) => this.read(data));
    socket.on("error", () => undefined);
    socket.on("close", () => this.closed());
  }

  private request(): void {
    const auth = `Authorization: Bearer ${this.seat.token}\r\n`;
    const head = `Host: ${this.host}:${this.port}\r\nUser-Agent: ${USER_AGENT}\r\n${auth}`;
    if (mode === "stream") {
      this.socket!.write(`GET /v1/stream?code=${this.seat.code}&format=ndjson HTTP/1.1\r\n${head}\r\n`);
    } else {
      this.socket!.write(`GET /v1/recv?code=${this.seat.code}&wait=25000 HTTP/1.1\r\n${head}\r\n`);
      this.ready();
    }
  }

  private ackInline = (ids: string[]): void => {
    const body = JSON.stringify({ code: this.seat.code, ids });
    const head = `Host: ${this.host}:${this.port}\r\nUser-Agent: ${USER_AGENT}\r\nAuthorization: Bearer ${this.seat.token}\r\n`;
    this.acking = true;
    this.socket!.write(
      `POST /v1/ack HTTP/1.1\r\n${head}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
  };

  private ready(): void {
    if (!this.opened) {
      this.opened = true;
      status.open++;
      this.everOpen = true;
    }
    const onReady = this.onReady;
    this.onReady = undefined;
    onReady?.();
  }

  private closed(): void {
    if (this.opened) status.open--;
    this.opened = false;
    if (stopping) return;
    if (this.noted) {
      // already counted
    } else if (this.everOpen) noteError("drop", `socket closed (${this.seat.code}, status ${this.statusCode})`);
    else noteError("connect", `socket closed before the answer (${this.seat.code})`);
    // Reconnect after a pause, as a client would.
    setTimeout(() => {
      if (!stopping) this.connectSocket();
    }, 1000);
  }

  private read(data: string): void {
    this.buffer += data;
    for (;;) {
      if (!this.inBody) {
        const end = this.buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 4);
        this.statusCode = Number(head.slice(9, 12));
        this.chunked = /\r\ntransfer-encoding: *chunked/i.test(head);
        const length = /\r\ncontent-length: *(\d+)/i.exec(head);
        this.length = length ? Number(length[1]) : 0;
        this.inBody = true;
        if (mode === "stream" && this.statusCode !== 200) {
          this.noted = true;
          noteError(this.everOpen ? "drop" : "connect", `stream ${this.statusCode} (${this.seat.code})`);
        }
      }
      if (this.chunked) {
        // Chunks: "<hex size>\r\n<data>\r\n"; a size of 0 ends the body.
        const lineEnd = this.buffer.indexOf("\r\n");
        if (lineEnd < 0) return;
        const size = Number.parseInt(this.buffer.slice(0, lineEnd), 16);
        if (this.buffer.length < lineEnd + 2 + size + 2) return;
        const chunk = this.buffer.slice(lineEnd + 2, lineEnd + 2 + size);
        this.buffer = this.buffer.slice(lineEnd + 2 + size + 2);
        if (size === 0) {
          this.bodyDone("");
          continue;
        }
        this.streamData(chunk);
      } else {
        if (this.buffer.length < this.length) return;
        const body = this.buffer.slice(0, this.length);
        this.buffer = this.buffer.slice(this.length);
        this.bodyDone(body);
      }
    }
  }

  /** Stream data: NDJSON lines (and single spaces: the first byte and the heartbeats). */
  private streamData(chunk: string): void {
    if (this.statusCode !== 200) return;
    this.ready();
    this.lines += chunk;
    for (let newline = this.lines.indexOf("\n"); newline >= 0; newline = this.lines.indexOf("\n")) {
      const line = this.lines.slice(0, newline).trim();
      this.lines = this.lines.slice(newline + 1);
      if (!line) continue;
      const event = JSON.parse(Buffer.from(line, "latin1").toString()) as {
        event: string;
        id?: string;
        text?: string;
        reason?: string;
      };
      if (event.event === "message") arrived(this.seat, event.id!, event.text!);
      else if (event.event === "end" && !stopping) {
        this.noted = true;
        noteError("drop", `stream ended: ${event.reason}`);
      }
    }
  }

  /** The end of a body with a content length (a recv's or an ack's answer), or of a chunked one. */
  private bodyDone(body: string): void {
    this.inBody = false;
    if (mode === "stream") {
      // The stream's answer ended (an error answer, or `end`): the server closes or we do.
      this.lines = "";
      if (!stopping) this.socket?.destroy();
      return;
    }
    if (this.acking) {
      this.acking = false;
      if (this.statusCode === 200) acked++;
      else {
        ackErrors++;
        if (status.errorSamples.length < 10) status.errorSamples.push(`ack ${this.statusCode}: ${body.slice(0, 200)}`);
      }
    } else if (this.statusCode === 200) {
      const reply = JSON.parse(Buffer.from(body, "latin1").toString()) as {
        messages: { id: string; text: string }[];
      };
      if (reply.messages.length) {
        for (const m of reply.messages) arrived(this.seat, m.id, m.text, true);
        this.ackInline(reply.messages.map((m) => m.id));
        return;
      }
    } else {
      noteError(this.everOpen ? "drop" : "connect", `recv ${this.statusCode}: ${body.slice(0, 200)}`);
      // An error answer may close the connection (a 408 does): start again on a new one.
      this.noted = true;
      this.socket?.destroy();
      return;
    }
    if (!stopping) this.request();
  }
}

async function openRooms(count: number): Promise<void> {
  const clients = nodeUrls.map((url) => new RelayClient(url, 16));
  const rooms: [string, string, string][] = [];
  let next = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: Math.min(16 * clients.length, count) }, async (_, worker) => {
      const client = clients[worker % clients.length]!;
      while (next < count) {
        next++;
        for (let attempt = 0; ; attempt++) {
          try {
            const [a, b] = await client.room();
            rooms.push([a.code, a.token, b.token]);
            break;
          } catch (error) {
            errors++;
            if (attempt >= 5) throw error;
            await sleep(200);
          }
        }
      }
    }),
  );
  await Promise.all(clients.map((c) => c.close()));
  send({ type: "rooms", rooms, errors });
}

async function connectAll(concurrency: number): Promise<void> {
  const started = performance.now();
  for (const seat of seats) {
    const url = new URL(nodeUrls[seat.node]!);
    conns.push(new SeatConn(seat, url.hostname, Number(url.port)));
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, conns.length) }, async () => {
      while (next < conns.length) await conns[next++]!.start();
    }),
  );
  status.connectedMs = performance.now() - started;
  send({ type: "connected", status: snapshot() });
}

async function runLoad(rooms: number[], seconds: number, intervalMs: number): Promise<void> {
  const byRoom = new Map<number, ScaleSeat>();
  for (const seat of seats) if (!byRoom.has(seat.room)) byRoom.set(seat.room, seat);
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    rooms.map(async (room) => {
      const seat = byRoom.get(room)!;
      // Each room starts at its own moment within the first interval, then sends on its beat.
      await sleep(Math.random() * intervalMs);
      for (let seq = 0; performance.now() < end; seq++) {
        const beat = performance.now();
        try {
          await pool(seat.node).send(seat, `L ${room} ${seq} ${now()}`);
          sent++;
        } catch (error) {
          sendErrors++;
          if (status.errorSamples.length < 10) status.errorSamples.push(`send: ${(error as Error).message}`);
        }
        await sleep(Math.max(0, intervalMs - (performance.now() - beat)));
      }
    }),
  );
  send({ type: "loaded", sent, sendErrors });
}

function snapshot(): ClientStatus {
  return { ...status, errorSamples: [...status.errorSamples], rssMb: process.memoryUsage().rss / 2 ** 20 };
}

async function stop(): Promise<void> {
  stopping = true;
  for (const conn of conns) conn.close();
  await Promise.allSettled([...pools.values()].map((p) => p.close()));
  process.exit(0);
}

process.on("message", (message: ClientRequest) => {
  switch (message.type) {
    case "rooms":
      nodeUrls = message.nodeUrls;
      void openRooms(message.count).catch((error: Error) => send({ type: "failed", error: error.message }));
      break;
    case "seats":
      mode = message.mode;
      nodeUrls = message.nodeUrls;
      localAddress = message.localAddress;
      seats = message.seats;
      send({ type: "seated" });
      break;
    case "connect":
      void connectAll(message.concurrency);
      break;
    case "status":
      send({ type: "status", status: snapshot() });
      break;
    case "load":
      void runLoad(message.rooms, message.seconds, message.intervalMs);
      break;
    case "report": {
      const report: LoadReport = {
        sent,
        sendErrors,
        latencies,
        received,
        duplicates,
        acked,
        ackErrors,
        status: snapshot(),
      };
      send({ type: "report", report });
      break;
    }
    case "stop":
      void stop();
      break;
  }
});
// The orchestrator going away ends this process too: nothing is left running.
process.on("disconnect", () => void stop());
send({ type: "ready" });
