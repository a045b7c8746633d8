// The messages between the scale run (src/scale.ts) and its client processes
// (src/scale-client.ts), over IPC: what the run asks, and what a client reports.
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
