// `pnpm --filter @duet/bench idle-cost [--mode long-poll|stream] [--seats N] [--seconds S]
// [--env KEY=VALUE ...]`: what a waiting agent costs when nothing happens. One duet node on
// the run's own Redis; N seats (N/2 paired rooms) either loop `GET /v1/recv?wait=25000` or
// hold one `GET /v1/stream` each; nobody sends. After a settling period, over the window:
// the node's Redis round trips (INFO commandstats: scripts, PINGs, subscriptions) per seat
// per minute, the node's CPU per seat (µs/s), Redis's CPU, and RSS per seat (after a full
// GC, against the same node before the seats connected: the median of three readings 10 s
// apart), and first the node's CPU with no seat (--empty S seconds, default 30), so that the
// per-seat CPU can be read above the node's fixed cost too. Prints one JSON line.
//
// Then, with --latency K, K sends on a second node, each timed to the event on the first
// node (stream) or to the answer of the recv waiting there (long-poll): p50 / p99 ms.
import { setMaxListeners } from "node:events";
import { join } from "node:path";
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { RelayClient, inBatches, type Seat } from "./client.js";
import { LOAD_CPU, duetEnv, pin, startRedis, startServer } from "./processes.js";
import { commandStats, redisCpuSeconds, type CommandStats } from "./scenarios/redis-cost.js";
import { sleep, summarize } from "./stats.js";
import { extraEnvFromArgs, option } from "./cli-args.js";

const ROUND_TRIPS = new Set(["evalsha", "eval", "ssubscribe", "sunsubscribe", "subscribe", "unsubscribe", "ping"]);

const extraEnv = extraEnvFromArgs();

const mode = option("mode", "long-poll") as "long-poll" | "stream";
const seats = Number(option("seats", "1000"));
const seconds = Number(option("seconds", "60"));
const settleSeconds = Number(option("settle", "30"));
// The node's own CPU with no seat at all (its Redis heartbeat, timers), measured first over
// this many seconds: per-seat CPU is then also given above that fixed cost.
const emptySeconds = Number(option("empty", "30"));
const latencySamples = Number(option("latency", "0"));
// With --heap-snapshot DIR: the node writes a heap snapshot once the seats' rooms are open and
// before any seat connects, and another after the RSS readings (`node dist/heap-diff.js
// <empty> <waiting> <seats>` lists what each seat holds). Writing a snapshot costs the node
// native memory of its own: read RSS per seat from a run without this flag.
// --node-args "--flag …": Node / V8 flags for the measured node (and the sender), for the flags
// NODE_OPTIONS refuses (--optimize-for-size); --env NODE_OPTIONS=… takes the others.
const nodeArgs = option("node-args", "").split(" ").filter(Boolean);
const heapSnapshotDir = process.argv.includes("--heap-snapshot") ? option("heap-snapshot", "") : undefined;

/** One seat's long-poll loop, until aborted; onMessages sees every non-empty answer. */
async function keepWaiting(
  client: RelayClient,
  seat: Seat,
  signal: AbortSignal,
  onMessages?: (texts: string[]) => void,
): Promise<void> {
  while (!signal.aborted) {
    try {
      const messages = await client.recv(seat, 25_000, signal);
      if (messages.length) {
        onMessages?.(messages.map((m) => m.text));
        await client.ack(
          seat,
          messages.map((m) => m.id),
          signal,
        );
      }
    } catch {
      if (!signal.aborted) await sleep(100);
    }
  }
}

/** One seat's stream, held until aborted; onEvent sees every message id as it arrives. */
async function keepStreaming(
  pool: Pool,
  seat: Seat,
  signal: AbortSignal,
  onOpen: () => void,
  onEvent?: (text: string) => void,
): Promise<void> {
  while (!signal.aborted) {
    try {
      const response = await pool.request({
        method: "GET",
        path: `/v1/stream?code=${seat.code}&format=ndjson`,
        headers: { "user-agent": USER_AGENT, authorization: `Bearer ${seat.token}` },
        signal,
      });
      if (response.statusCode !== 200) throw new Error(`stream ${response.statusCode}`);
      onOpen();
      let buffered = "";
      for await (const chunk of response.body) {
        buffered += chunk.toString();
        for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          if (!line) continue;
          const event = JSON.parse(line) as { event: string; text?: string };
          if (event.event === "message" && event.text !== undefined) onEvent?.(event.text);
        }
      }
    } catch {
      if (!signal.aborted) await sleep(100);
    }
  }
}

async function main(): Promise<void> {
  pin(process.pid, LOAD_CPU);
  const redis = await startRedis();
  const env = duetEnv(redis.url, extraEnv);
  const node = await startServer(`duet idle ${mode}`, "duet-node.js", { env, execArgv: nodeArgs });
  // Rooms are opened (and the latency run's sends made) through a second node, so that the
  // measured node's RSS before the seats connect is that of a fresh node.
  const other = await startServer("duet sender", "duet-node.js", { env, cpu: LOAD_CPU, execArgv: nodeArgs });
  const setup = new RelayClient(other.url, 40);
  const client = new RelayClient(node.url, seats + 8);
  const streams = new Pool(node.url, { connections: seats + 8, pipelining: 1, bodyTimeout: 0, headersTimeout: 60_000 });
  const abort = new AbortController();
  setMaxListeners(0, abort.signal);
  const loops: Promise<unknown>[] = [];
  const arrivals = new Map<string, (at: number) => void>();
  const arrived = (key: string) => arrivals.get(key)?.(performance.now());
  try {
    const rooms = await inBatches(Math.ceil(seats / 2), 32, () => setup.room());
    const all = rooms.flat().slice(0, seats);
    await sleep(500);
    const emptyStart = await node.metrics();
    await sleep(emptySeconds * 1000);
    const emptyEnd = await node.metrics();
    const emptyCpuUsPerSecond =
      emptySeconds > 0
        ? (emptyEnd.cpuUserUs + emptyEnd.cpuSystemUs - emptyStart.cpuUserUs - emptyStart.cpuSystemUs) / emptySeconds
        : Number.NaN;
    const before = await node.metrics({ gc: true });
    if (heapSnapshotDir) await node.heapSnapshot(join(heapSnapshotDir, `idle-${mode}-${seats}-empty.heapsnapshot`));
    let opened = 0;
    for (let i = 0; i < all.length; i += 100) {
      for (const seat of all.slice(i, i + 100)) {
        const onArrival = (texts: string[] | string) => {
          for (const text of Array.isArray(texts) ? texts : [texts]) arrived(`${seat.token}:${text}`);
        };
        loops.push(
          mode === "stream"
            ? keepStreaming(streams, seat, abort.signal, () => opened++, onArrival)
            : keepWaiting(client, seat, abort.signal, onArrival),
        );
      }
      // A long-polling seat is not waiting between an answer and its re-poll: once the first
      // recvs' 25 s run out, on a busy machine a few hundred of them are in that gap at any
      // moment, so a long-poll batch passes with 98 % of the seats so far waiting.
      const soFar = Math.min(all.length, i + 100);
      const target = mode === "long-poll" ? Math.floor(soFar * 0.98) : soFar;
      for (const deadline = Date.now() + 20_000; (await node.metrics()).waiting < target; await sleep(20)) {
        if (Date.now() > deadline)
          throw new Error(`only ${(await node.metrics()).waiting} of ${soFar} seats are waiting`);
      }
    }
    // Past the first recvs' re-polls and the subscriptions' linger.
    await sleep(settleSeconds * 1000);
    const statsStart: CommandStats = await commandStats(redis.client);
    const redisCpuStart = await redisCpuSeconds(redis.client);
    const start = await node.metrics();
    await sleep(seconds * 1000);
    const end = await node.metrics();
    const statsEnd = await commandStats(redis.client);
    const redisCpuEnd = await redisCpuSeconds(redis.client);
    const atN = await node.metrics({ gc: true });
    // RSS moves with the GC's timing (pages freed after a burst of re-polls are returned
    // later): two more readings, 10 s apart, each after a full GC; the median is reported.
    const rssReadings = [atN.rss];
    for (let i = 0; i < 2; i++) {
      await sleep(10_000);
      rssReadings.push((await node.metrics({ gc: true })).rss);
    }
    if (heapSnapshotDir) await node.heapSnapshot(join(heapSnapshotDir, `idle-${mode}-${seats}-waiting.heapsnapshot`));
    const rssPerSeat = rssReadings.map((rss) => (rss - before.rss) / seats / 1024).sort((a, b) => a - b);
    const byCommand: Record<string, number> = {};
    let roundTrips = 0;
    for (const [name, { calls }] of Object.entries(statsEnd)) {
      const delta = calls - (statsStart[name]?.calls ?? 0);
      if (delta > 0 && ROUND_TRIPS.has(name)) {
        byCommand[name] = delta;
        roundTrips += delta;
      }
    }
    const minutes = seconds / 60;
    const cpuUs = end.cpuUserUs + end.cpuSystemUs - start.cpuUserUs - start.cpuSystemUs;
    const result: Record<string, unknown> = {
      mode,
      seats,
      windowSeconds: seconds,
      waitingAtEnd: atN.waiting,
      redisRoundTripsPerSeatPerMinute: roundTrips / seats / minutes,
      redisRoundTripsByCommandPerMinute: Object.fromEntries(
        Object.entries(byCommand).map(([k, v]) => [k, v / minutes]),
      ),
      relayCpuUsPerSeatPerSecond: cpuUs / seats / seconds,
      relayCpuShareOfCore: cpuUs / 1e6 / seconds,
      redisCpuUsPerSeatPerSecond: ((redisCpuEnd - redisCpuStart) * 1e6) / seats / seconds,
      relayCpuUsPerSecondWithNoSeats: emptyCpuUsPerSecond,
      relayCpuUsPerSeatPerSecondAboveEmptyNode: (cpuUs / seconds - emptyCpuUsPerSecond) / seats,
      rssPerSeatKb: rssPerSeat[1],
      rssPerSeatKbReadings: rssPerSeat,
      heapPerSeatKb: (atN.heapUsed - before.heapUsed) / seats / 1024,
      // V8's committed heap: what it holds beyond heapUsed is pages it keeps after the GC
      // (the young generation grown under the request rate, freed old-space pages).
      heapTotalPerSeatKb: (atN.heapTotal - before.heapTotal) / seats / 1024,
      rssMb: atN.rss / 2 ** 20,
      heapUsedMb: atN.heapUsed / 2 ** 20,
      heapTotalMb: atN.heapTotal / 2 ** 20,
      env: extraEnv,
      ...(nodeArgs.length ? { nodeArgs } : {}),
    };
    if (latencySamples > 0) {
      // Sends through the second node to seats waiting on the first: the wake crosses Redis.
      const sender = new RelayClient(other.url, 8);
      const samples: number[] = [];
      for (let i = 0; i < latencySamples; i++) {
        const room = rooms[i % rooms.length]!;
        const [from, to] = [room[0], room[1]];
        const key = `${to.token}:ping ${i}`;
        const arrival = new Promise<number>((resolve) => arrivals.set(key, resolve));
        const started = performance.now();
        const { id } = await sender.send(from, `ping ${i}`);
        const at = await Promise.race([arrival, sleep(10_000).then(() => Number.NaN)]);
        arrivals.delete(key);
        if (!Number.isNaN(at)) samples.push(at - started);
        if (mode === "stream") await sender.ack(to, [id]).catch(() => undefined);
        await sleep(20);
      }
      await sender.close();
      const summary = summarize(samples.sort((a, b) => a - b));
      result.latency = { samples: summary.count, p50Ms: summary.p50, p99Ms: summary.p99, maxMs: summary.max };
    }
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    abort.abort();
    await Promise.allSettled(loops);
    await client.close().catch(() => undefined);
    await setup.close().catch(() => undefined);
    await streams.destroy().catch(() => undefined);
    await node.stop();
    await other.stop();
    await redis.stop();
  }
}

main().catch((error) => {
  process.stderr.write(`idle-cost: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
