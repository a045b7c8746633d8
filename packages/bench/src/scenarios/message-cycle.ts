// Scenario 1: R rooms, both seats looping send -> recv -> ack. Messages per second and
// send-to-recv latency (the sender stamps the text with its clock; the receiver's clock
// is the same process's), at increasing concurrency until throughput stops rising.
import { setMaxListeners } from "node:events";
import { performance } from "node:perf_hooks";
import { RelayClient, inBatches, type Seat } from "../client.js";
import type { ServerProcess } from "../processes.js";
import { summarize } from "../stats.js";

export interface CycleResult {
  rooms: number;
  messagesPerSecond: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  /** Messages delivered in the measured window. */
  messages: number;
  /** Sends accepted in the measured window (each starts one message life). */
  sends: number;
  /** Server CPU time per message life (send + recv + ack), user + system. */
  serverCpuUsPerMessage?: number;
  /** Share of one core the server and the load generator used in the window. */
  serverCpuShare?: number;
  generatorCpuShare: number;
}

// About 100 bytes of text, as in the stack's baseline measurements.
const PADDING = "x".repeat(88);

/**
 * Runs one level: fresh rooms (leftovers of an aborted level never fill a mailbox), a
 * warm-up, then a measured window; whatever is in flight at the end is aborted.
 */
export async function runCycle(
  origin: string,
  rooms: number,
  options: {
    warmupMs: number;
    measureMs: number;
    server?: ServerProcess;
    onMeasureStart?: () => Promise<void>;
    onMeasureEnd?: () => Promise<void>;
  },
): Promise<CycleResult> {
  const client = new RelayClient(origin, rooms * 2 + 4);
  const pairs = await inBatches(rooms, 32, () => client.room());
  const abort = new AbortController();
  // Every in-flight request listens on this one signal.
  setMaxListeners(0, abort.signal);
  let measuring = false;
  let stopped = false;
  const latencies: number[] = [];
  let messages = 0;
  let requests = 0;
  let sends = 0;
  let errors = 0;

  const loop = async (me: Seat) => {
    while (!stopped) {
      try {
        const sentAt = performance.now();
        await client.send(me, `${sentAt.toFixed(3)} ${PADDING}`, abort.signal);
        if (measuring) {
          requests++;
          sends++;
        }
        let got: { id: string; text: string }[] = [];
        while (got.length === 0 && !stopped) {
          got = await client.recv(me, 25_000, abort.signal);
          if (measuring) requests++;
        }
        const now = performance.now();
        if (measuring) {
          for (const message of got) latencies.push(now - Number.parseFloat(message.text));
          messages += got.length;
        }
        if (got.length)
          await client.ack(
            me,
            got.map((m) => m.id),
            abort.signal,
          );
        if (measuring) requests++;
      } catch (error) {
        if (stopped) return;
        errors++;
        if (errors > 50) throw error;
      }
    }
  };

  const loops = pairs.flatMap(([a, b]) => [loop(a), loop(b)]);
  await new Promise((r) => setTimeout(r, options.warmupMs));
  await options.onMeasureStart?.();
  const serverBefore = await options.server?.metrics();
  const generatorBefore = process.cpuUsage();
  const started = performance.now();
  measuring = true;
  await new Promise((r) => setTimeout(r, options.measureMs));
  measuring = false;
  const seconds = (performance.now() - started) / 1000;
  const generator = process.cpuUsage(generatorBefore);
  const serverAfter = await options.server?.metrics();
  await options.onMeasureEnd?.();
  const serverCpuUs =
    serverBefore && serverAfter
      ? serverAfter.cpuUserUs + serverAfter.cpuSystemUs - serverBefore.cpuUserUs - serverBefore.cpuSystemUs
      : undefined;
  stopped = true;
  abort.abort();
  await Promise.allSettled(loops);
  await client.close();
  const { p50, p99 } = summarize(latencies);
  return {
    rooms,
    messagesPerSecond: messages / seconds,
    requestsPerSecond: requests / seconds,
    p50Ms: p50,
    p99Ms: p99,
    errors,
    messages,
    sends,
    serverCpuUsPerMessage: serverCpuUs === undefined ? undefined : serverCpuUs / messages,
    serverCpuShare: serverCpuUs === undefined ? undefined : serverCpuUs / 1e6 / seconds,
    generatorCpuShare: (generator.user + generator.system) / 1e6 / seconds,
  };
}
