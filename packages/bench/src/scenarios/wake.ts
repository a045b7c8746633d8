// Scenario 2: wake latency across nodes. A recv waits on node B; once B holds it, the send
// goes to node A, and the clock runs from the send's start to the end of the recv's answer.
// The baseline does the same with two bare node:http processes: B holds a request on one
// SSUBSCRIBEd channel, A's POST /pub SPUBLISHes (and, as a third figure, the bench
// SPUBLISHes directly, with no HTTP hop on the way in).
import { performance } from "node:perf_hooks";
import type { Redis } from "ioredis";
import { RelayClient } from "../client.js";
import type { ServerProcess } from "../processes.js";
import { sleep, summarize } from "../stats.js";

export interface WakeResult {
  wakes: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

// A waiting recv registers itself, then reads Redis once; this pause lets that read finish
// so the wake, not the first read, is what answers.
const SETTLE_MS = 3;

async function untilHeld(node: ServerProcess, deadlineMs = 5_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while ((await node.metrics()).waiting < 1) {
    if (Date.now() > deadline) throw new Error(`${node.name} never held the request`);
  }
  await sleep(SETTLE_MS);
}

export function summarizeWakes(samples: number[]): WakeResult {
  const s = summarize(samples);
  return { wakes: s.count, p50Ms: s.p50, p99Ms: s.p99, maxMs: s.max };
}

/** Adds `wakes` duet wake latencies (ms) to `samples`. */
export async function duetWakes(
  nodeA: ServerProcess,
  nodeB: ServerProcess,
  wakes: number,
  samples: number[],
): Promise<void> {
  const a = new RelayClient(nodeA.url, 2);
  const b = new RelayClient(nodeB.url, 2);
  const [seatA, seatB] = await a.room();
  for (let i = 0; i < wakes; i++) {
    const recv = b.recv(seatB, 25_000);
    await untilHeld(nodeB);
    const started = performance.now();
    await a.send(seatA, `wake ${i}`);
    const messages = await recv;
    samples.push(performance.now() - started);
    if (messages.length !== 1) throw new Error(`wake ${i}: expected one message, got ${messages.length}`);
    await b.ack(seatB, [messages[0]!.id]);
  }
  await Promise.all([a.close(), b.close()]);
}

/** Bare baseline; with `publisher` the trigger is an HTTP call to it, else a direct SPUBLISH. */
export async function bareWakes(
  holder: ServerProcess,
  wakes: number,
  trigger: { publisher: ServerProcess } | { redis: Redis },
  samples: number[],
): Promise<void> {
  const held = new RelayClient(holder.url, 2);
  const pub = "publisher" in trigger ? new RelayClient(trigger.publisher.url, 2) : undefined;
  for (let i = 0; i < wakes; i++) {
    const wait = held.call("GET", `/wait?id=${i}`);
    await untilHeld(holder);
    const started = performance.now();
    if (pub) await pub.call("POST", `/pub?id=${i}`, {});
    else await (trigger as { redis: Redis }).redis.spublish("bench:wake", String(i));
    await wait;
    samples.push(performance.now() - started);
  }
  await Promise.all([held.close(), pub?.close()]);
}
