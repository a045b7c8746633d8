// The state one client process of the scale run (src/scale-client.ts) shares between its
// seats' connections (src/seat-conn.ts) and its message handler: what it was told (mode,
// nodes, seats), what it counts, and what happens to each message that arrives.
import { RelayClient } from "./client.js";
import type { ClientStatus, ScaleSeat } from "./scale-messages.js";

/** The machine's clock, in ms: send and receive may be in different processes. */
export const now = () => performance.timeOrigin + performance.now();

/** What the run told this process; `stopping` once it is told to stop. */
export const run = {
  mode: "stream" as "stream" | "long-poll",
  nodeUrls: [] as string[],
  localAddress: undefined as string | undefined,
  seats: [] as ScaleSeat[],
  stopping: false,
};
export const status: ClientStatus = { open: 0, connectErrors: 0, drops: 0, errorSamples: [], rssMb: 0 };
/** The message load's counts, for the report. */
export const counts = {
  latencies: [] as number[],
  received: 0,
  duplicates: 0,
  acked: 0,
  ackErrors: 0,
  sent: 0,
  sendErrors: 0,
};
const seen = new Set<string>();
/** Pooled clients by node index, for sends and the acks of streamed messages. */
export const pools = new Map<number, RelayClient>();

export function noteError(kind: "connect" | "drop", detail: string): void {
  if (kind === "connect") status.connectErrors++;
  else status.drops++;
  if (status.errorSamples.length < 10) status.errorSamples.push(`${kind}: ${detail}`);
}

export function pool(node: number): RelayClient {
  let client = pools.get(node);
  if (!client) {
    client = new RelayClient(run.nodeUrls[node]!, 4);
    pools.set(node, client);
  }
  return client;
}

/** A message arrived for seat: time it (texts made by the load: "L <room> <seq> <sent at>"), then ack it. */
export function arrived(seat: ScaleSeat, id: string, text: string, ackedInline = false): void {
  const key = `${seat.room}:${id}`;
  if (seen.has(key)) {
    counts.duplicates++;
  } else {
    seen.add(key);
    counts.received++;
    const parts = text.split(" ");
    if (parts[0] === "L") counts.latencies.push(now() - Number(parts[3]));
  }
  if (ackedInline) return;
  pool(seat.node)
    .ack(seat, [id])
    .then(
      () => counts.acked++,
      (error: Error) => {
        counts.ackErrors++;
        if (status.errorSamples.length < 10) status.errorSamples.push(`ack: ${error.message}`);
      },
    );
}
