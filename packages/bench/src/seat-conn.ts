// One seat's connection in a client process of the scale run (src/scale-client.ts).
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
import { arrived, counts, noteError, run, status } from "./scale-client-state.js";
import type { ScaleSeat } from "./scale-messages.js";

/**
 * One seat's connection: a minimal HTTP/1.1 reader for the two answers it gets, a chunked
 * stream of NDJSON lines or a JSON body with a content length. latin1 keeps one character
 * per byte, so lengths count right (the bodies that matter are ASCII).
 */
export class SeatConn {
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
    const socket = connect({ host: this.host, port: this.port, localAddress: run.localAddress, noDelay: true });
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
    if (run.mode === "stream") {
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
    if (run.stopping) return;
    if (this.noted) {
      // already counted
    } else if (this.everOpen) noteError("drop", `socket closed (${this.seat.code}, status ${this.statusCode})`);
    else noteError("connect", `socket closed before the answer (${this.seat.code})`);
    // Reconnect after a pause, as a client would.
    setTimeout(() => {
      if (!run.stopping) this.connectSocket();
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
        if (run.mode === "stream" && this.statusCode !== 200) {
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
      else if (event.event === "end" && !run.stopping) {
        this.noted = true;
        noteError("drop", `stream ended: ${event.reason}`);
      }
    }
  }

  /** The end of a body with a content length (a recv's or an ack's answer), or of a chunked one. */
  private bodyDone(body: string): void {
    this.inBody = false;
    if (run.mode === "stream") {
      // The stream's answer ended (an error answer, or `end`): the server closes or we do.
      this.lines = "";
      if (!run.stopping) this.socket?.destroy();
      return;
    }
    if (this.acking) {
      this.acking = false;
      if (this.statusCode === 200) counts.acked++;
      else {
        counts.ackErrors++;
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
    if (!run.stopping) this.request();
  }
}
