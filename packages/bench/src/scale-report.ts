// The scale run's report (src/scale.ts): its results written as JSON and as Markdown (the
// tables of results/scale-*.md).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { name, smoke } from "./scale-options.js";
import { median } from "./stats.js";

const kb = (n: number) => n.toFixed(1);
const ms = (n: number) => n.toFixed(1);
const int = (n: number) => Math.round(n).toLocaleString("en-US");

export type Results = {
  name: string;
  mode: string;
  cluster: boolean;
  bare?: string;
  /** The measured nodes were containers (src/container-node.ts): the image and the manifests' limits. */
  container?: { image: string; memory: string; cpus: string; nodeOptions: string };
  seats: number;
  rooms: number;
  nodes: number;
  clients: number;
  command: string;
  machine: string;
  at: string;
  loadAverage: { before: number; after: number };
  roomsSeconds: number;
  connect: { seconds: number; errors: number };
  idle: {
    windowSeconds: number;
    nodes: {
      node: string;
      seats: number;
      fixedCpuUsPerSecond: number;
      idleCpuUsPerSecond: number;
      idleCpuUsPerSeatPerSecond: number;
      fixedRssMb: number;
      fixedHeapMb: number;
      rssMb: number;
      heapMb: number;
      heapTotalMb: number;
      rssPerSeatKb: number;
      heapPerSeatKb: number;
      heapTotalPerSeatKb: number;
      eldP99Ms: number;
      eldMaxMs: number;
      /** The main thread's time runnable but waiting for a CPU, ms a second (the machine's other processes). */
      runQueueMsPerSecond?: number;
    }[];
    redis: {
      usedMemoryMb: number;
      usedMemoryMbRooms: number;
      rssMb: number;
      bytesPerRoom: number;
      bytesPerSeatWaiting: number;
      cpuUsPerSecond: number;
      commandsPerSecond: number;
      roundTripsPerSecond: number;
    };
    clientRssMb: number[];
  };
  load: {
    rooms: number;
    seconds: number;
    sent: number;
    received: number;
    missing: number;
    sendErrors: number;
    ackErrors: number;
    messagesPerSecond: number;
    latency: { samples: number; p50Ms: number; p99Ms: number; maxMs: number };
    nodeCpuUsPerSecond: number[];
    nodeEldP99Ms: number[];
    nodeEldMaxMs: number[];
    nodeRunQueueMsPerSecond?: number[];
    redisCpuUsPerSecond: number;
    redisCommandsPerSecond: number;
    redisRoundTripsPerSecond: number;
  };
  after: { seconds: number; nodeCpuUsPerSecond: number[] };
  errors: Record<string, unknown>;
  totalErrors: number;
};

function markdown(r: Results): string {
  const lines = [
    `# ${r.seats.toLocaleString("en-US")} ${r.mode === "stream" ? "streaming" : "long-polling"} seats on ${r.nodes} ${r.bare ? `bare ${r.bare} servers that only hold the requests (no Redis)` : `relay nodes, ${r.cluster ? "a 3-master Redis Cluster" : "one Redis"}`}`,
    "",
    ...(r.container
      ? [
          `Each relay node a container from \`${r.container.image}\` with the Kubernetes manifests' limits (memory ${r.container.memory}, no swap, ${r.container.cpus} CPU) and NODE_OPTIONS \`${r.container.nodeOptions}\`; its figures read from its own /metrics (memory after a settle, no forced GC; event-loop delay since the previous scrape).`,
          "",
        ]
      : []),
    `\`${r.command}\` — ${r.at}; ${r.machine}; 1-minute loadavg ${r.loadAverage.before.toFixed(1)} before, ${r.loadAverage.after.toFixed(1)} after (the relays, ${r.clients} client processes and Redis share the cores).`,
    "",
    `${r.rooms.toLocaleString("en-US")} rooms opened in ${r.roomsSeconds.toFixed(0)} s (through two setup nodes, stopped before the seats connect). Every seat connected and waiting on its node after **${r.connect.seconds.toFixed(1)} s**, **${r.connect.errors} errors** while connecting. Errors in all: **${r.totalErrors}** (${JSON.stringify(r.errors)}).`,
    "",
    `## Idle (${r.idle.windowSeconds} s window)`,
    "",
    "| Node | seats | RSS MB empty → waiting | RSS KB / seat | heap MB empty → waiting | heap KB / seat | V8 committed KB / seat | CPU µs/s empty (fixed) | CPU µs/s idle | CPU µs/s per seat above empty | event-loop delay p99 / max ms | waiting for a CPU ms/s |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...r.idle.nodes.map(
      (n) =>
        `| ${n.node} | ${int(n.seats)} | ${int(n.fixedRssMb)} → ${int(n.rssMb)} | ${kb(n.rssPerSeatKb)} | ${int(n.fixedHeapMb)} → ${int(n.heapMb)} | ${kb(n.heapPerSeatKb)} | ${kb(n.heapTotalPerSeatKb)} | ${int(n.fixedCpuUsPerSecond)} | ${int(n.idleCpuUsPerSecond)} | ${n.idleCpuUsPerSeatPerSecond.toFixed(2)} | ${ms(n.eldP99Ms)} / ${int(n.eldMaxMs)} | ${ms(n.runQueueMsPerSecond ?? Number.NaN)} |`,
    ),
    "",
    `Medians over the nodes: RSS ${kb(median(r.idle.nodes.map((n) => n.rssPerSeatKb)))} KB, heap ${kb(median(r.idle.nodes.map((n) => n.heapPerSeatKb)))} KB, CPU ${median(r.idle.nodes.map((n) => n.idleCpuUsPerSeatPerSecond)).toFixed(2)} µs/s per seat; fixed CPU ${int(median(r.idle.nodes.map((n) => n.fixedCpuUsPerSecond)))} µs/s and RSS ${int(median(r.idle.nodes.map((n) => n.fixedRssMb)))} MB per node. Client processes: ${r.idle.clientRssMb.map((m) => int(m)).join(", ")} MB RSS.`,
    "",
    "| Redis | used memory MB (rooms only → seats waiting) | bytes per room | bytes per waiting seat | RSS MB | CPU µs/s | round trips/s (scripts, PINGs, subscriptions) | commands/s (with those inside scripts) |",
    "|---|---|---|---|---|---|---|---|",
    `| idle | ${int(r.idle.redis.usedMemoryMbRooms)} → ${int(r.idle.redis.usedMemoryMb)} | ${int(r.idle.redis.bytesPerRoom)} | ${int(r.idle.redis.bytesPerSeatWaiting)} | ${int(r.idle.redis.rssMb)} | ${int(r.idle.redis.cpuUsPerSecond)} | ${r.idle.redis.roundTripsPerSecond.toFixed(1)} | ${r.idle.redis.commandsPerSecond.toFixed(1)} |`,
    "",
    `## Message load: ${int(r.load.rooms)} rooms (${((100 * r.load.rooms) / r.rooms).toFixed(1)} %) sending once a second for ${r.load.seconds.toFixed(0)} s`,
    "",
    "| sent | received | messages/s | send → event p50 ms | p99 ms | max ms | send errors | ack errors | missing |",
    "|---|---|---|---|---|---|---|---|---|",
    `| ${int(r.load.sent)} | ${int(r.load.received)} | ${int(r.load.messagesPerSecond)} | ${ms(r.load.latency.p50Ms)} | ${ms(r.load.latency.p99Ms)} | ${ms(r.load.latency.maxMs)} | ${r.load.sendErrors} | ${r.load.ackErrors} | ${r.load.missing} |`,
    "",
    "| Node | CPU µs/s idle | under load | idle after | event-loop delay p99 / max ms under load | waiting for a CPU ms/s under load |",
    "|---|---|---|---|---|---|",
    ...r.idle.nodes.map(
      (n, i) =>
        `| ${n.node} | ${int(n.idleCpuUsPerSecond)} | ${int(r.load.nodeCpuUsPerSecond[i]!)} | ${int(r.after.nodeCpuUsPerSecond[i]!)} | ${ms(r.load.nodeEldP99Ms[i]!)} / ${int(r.load.nodeEldMaxMs[i]!)} | ${ms(r.load.nodeRunQueueMsPerSecond?.[i] ?? Number.NaN)} |`,
    ),
    "",
    `Redis under load: ${int(r.load.redisCpuUsPerSecond)} µs/s CPU, ${int(r.load.redisRoundTripsPerSecond)} round trips/s, ${int(r.load.redisCommandsPerSecond)} commands/s.`,
    "",
  ];
  return lines.join("\n");
}

/** Writes the results as results[/smoke]/<name>.json and .md; returns the Markdown. */
export function writeResults(results: Results): string {
  const dir = join(__dirname, "..", "results", smoke ? "smoke" : "");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  const md = markdown(results);
  writeFileSync(join(dir, `${name}.md`), md);
  return md;
}
