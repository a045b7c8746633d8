// `pnpm --filter @duet/bench scale [--seats N] [--nodes K] [--clients C] [--mode stream|long-poll]
// [--cluster] [--smoke]`: many agents on several relay nodes, measured: K duet nodes, the run's
// own Redis (or Cluster), C client processes (src/scale-client.ts) holding N seats in N/2 rooms,
// the two seats of a room on different nodes. Phases: empty nodes, rooms opened, seats
// connected, idle window, message load, idle again. No process holds more than ~17,000 seats
// (a 20,000-descriptor limit); everything started is stopped by its PID on every way out.
// What each phase reports: packages/bench/README.md.
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { type SpawnedCluster, type SpawnedRedis, spawnCluster, spawnRedis } from "@duet/testkit";
import type { NodeMetrics } from "./node-metrics.js";
import { duetEnv, type ServerProcess } from "./processes.js";
import { manifestLimits } from "./container-node.js";
import { cpuOf, metricsOf, startNode, waitUntil } from "./scale-nodes.js";
import { ClientProcess, children, killAll, nodePids } from "./scale-children.js";
import type { ClientStatus, LoadReport, ScaleSeat } from "./scale-messages.js";
import {
  smoke,
  mode,
  cluster,
  seats,
  nodeCount,
  clientCount,
  emptySeconds,
  settleSeconds,
  windowSeconds,
  loadSeconds,
  afterSeconds,
  loadShare,
  connectConcurrency,
  heapSnapshotDir,
  extraEnv,
  bare,
  containerImage,
  name,
  quiet,
} from "./scale-options.js";
import { kept, log, t0 } from "./scale-log.js";
import { type RedisView, redisView } from "./scale-redis-view.js";
import { writeResults } from "./scale-report.js";
import { median, sleep, summarize } from "./stats.js";

async function main(): Promise<void> {
  // A client holds the seats of the nodes i mod C: with more nodes than clients, whole nodes' worth.
  const perClient = Math.ceil(nodeCount / clientCount) * Math.ceil(seats / nodeCount);
  if (seats / nodeCount > 19_000 || perClient > 19_000)
    throw new Error(`${seats} seats on ${nodeCount} nodes and ${clientCount} clients: over 19,000 sockets a process`);
  const loadBefore = loadavg()[0]!;
  log(
    `${name}: ${seats} seats, ${nodeCount} nodes, ${clientCount} clients, ${cluster ? "Redis Cluster (3 masters)" : "one Redis"}`,
  );

  let redis: SpawnedRedis | undefined;
  let redisCluster: SpawnedCluster | undefined;
  const nodes: ServerProcess[] = [];
  const setupNodes: ServerProcess[] = [];
  const clients: ClientProcess[] = [];
  let view: RedisView | undefined;
  try {
    let env: Record<string, string> = {};
    if (bare) {
      // no Redis
    } else if (cluster) {
      redisCluster = await spawnCluster(3);
      for (const node of redisCluster.nodes) children.add(node.process);
      env = duetEnv("", extraEnv);
      delete env.REDIS_URL;
      env.REDIS_CLUSTER_NODES = redisCluster.seeds;
      view = redisView(redisCluster.nodes.map((n) => n.port));
    } else {
      redis = await spawnRedis(["--maxclients", "50000"]);
      children.add(redis.process);
      env = duetEnv(redis.url, extraEnv);
      view = redisView([redis.port]);
    }
    const start = async (label: string, measured = false) => {
      const server = await startNode(label, env, measured);
      nodePids.add(server.pid);
      return server;
    };
    nodes.push(...(await Promise.all(Array.from({ length: nodeCount }, (_, i) => start(`node ${i}`, true)))));
    if (!bare) setupNodes.push(...(await Promise.all([start("setup 0"), start("setup 1")])));
    for (let i = 0; i < clientCount; i++) clients.push(new ClientProcess(i));
    await Promise.all(clients.map((c) => c.next("ready", 30_000)));

    // The nodes empty: their fixed CPU (heartbeats, the bench's own event-loop sampler) and memory.
    await sleep(1000);
    const emptyStart = await Promise.all(nodes.map((n) => metricsOf(n)));
    await sleep(emptySeconds * 1000);
    const emptyEnd = await Promise.all(nodes.map((n) => metricsOf(n)));
    const emptyCpu = nodes.map((_, i) => (cpuOf(emptyEnd[i]!) - cpuOf(emptyStart[i]!)) / emptySeconds);
    const noRedis = { usedMemory: 0, rss: 0, cpuSeconds: 0, commands: 0, roundTrips: 0 };
    const redisInfo = () => (view ? view.info() : Promise.resolve(noRedis));
    const redisEmpty = await redisInfo();

    // Rooms, through the setup nodes.
    const rooms = seats / 2;
    let t = performance.now();
    const share = (i: number, of: number, total: number) =>
      Math.floor(((i + 1) * total) / of) - Math.floor((i * total) / of);
    const roomLists = bare
      ? clients.map((_, i) => ({
          rooms: Array.from(
            { length: share(i, clients.length, rooms) },
            (_, j) => [`bare-${i}-${j}`, "t", "t"] as [string, string, string],
          ),
          errors: 0,
        }))
      : await Promise.all(
          clients.map((c, i) =>
            c.request<{ rooms: [string, string, string][]; errors: number }>(
              { type: "rooms", count: share(i, clients.length, rooms), nodeUrls: setupNodes.map((n) => n.url) },
              "rooms",
            ),
          ),
        );
    const allRooms = roomLists.flatMap((r) => r.rooms);
    const roomErrors = roomLists.reduce((sum, r) => sum + r.errors, 0);
    const roomsSeconds = (performance.now() - t) / 1000;
    log(`${allRooms.length} rooms opened in ${roomsSeconds.toFixed(1)} s (${roomErrors} errors, retried)`);
    await Promise.all(setupNodes.map((n) => n.stop()));
    for (const n of setupNodes) nodePids.delete(n.pid);
    setupNodes.length = 0;
    const redisRooms = await redisInfo();

    // Seats: a room's seat a on node r mod K, its seat b on another node; a client holds the seats of the nodes i mod C.
    const perClient: ScaleSeat[][] = clients.map(() => []);
    const perNode = new Array<number>(nodeCount).fill(0);
    allRooms.forEach(([code, tokenA, tokenB], room) => {
      const nodeA = room % nodeCount;
      const nodeB = (nodeA + 1 + (Math.floor(room / nodeCount) % (nodeCount - 1))) % nodeCount;
      for (const [token, node] of [
        [tokenA, nodeA],
        [tokenB, nodeB],
      ] as const) {
        perClient[node % clientCount]!.push({ code, token, node, room });
        perNode[node]!++;
      }
    });
    await Promise.all(
      clients.map((c, i) =>
        c.request(
          {
            type: "seats",
            mode,
            nodeUrls: nodes.map((n) => n.url),
            seats: perClient[i]!,
          },
          "seated",
        ),
      ),
    );

    const before = await Promise.all(nodes.map((n) => metricsOf(n, { gc: true })));
    if (heapSnapshotDir) await nodes[0]!.heapSnapshot(join(heapSnapshotDir, `${name}-node0-empty.heapsnapshot`));

    // Connect everyone.
    t = performance.now();
    const connected = Promise.all(
      clients.map((c) =>
        c.request<{ status: ClientStatus }>({ type: "connect", concurrency: connectConcurrency }, "connected"),
      ),
    );
    let lastLog = 0;
    await waitUntil("every seat waiting on its node", Math.max(120_000, seats * 10), async () => {
      const waiting = (await Promise.all(nodes.map((n) => metricsOf(n)))).map((m) => m.waiting);
      const total = waiting.reduce((a, b) => a + b, 0);
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now();
        log(`connecting: ${total} of ${seats} waiting (${waiting.join(", ")})`);
      }
      return total >= seats;
    });
    const connectSeconds = (performance.now() - t) / 1000;
    const connectStatus = (await connected).map((c) => c.status);
    const connectErrors = connectStatus.reduce((sum, s) => sum + s.connectErrors + s.drops, 0);
    log(`${seats} seats waiting after ${connectSeconds.toFixed(1)} s (${connectErrors} errors)`);

    // Idle.
    await sleep(settleSeconds * 1000);
    const idleStart = await Promise.all(nodes.map((n) => metricsOf(n)));
    const redisIdleStart = await redisInfo();
    await sleep(windowSeconds * 1000);
    const idleEnd = await Promise.all(nodes.map((n) => metricsOf(n)));
    const redisIdleEnd = await redisInfo();
    // Memory: after a full GC, the median of three readings 5 s apart (RSS moves with the GC's timing).
    const readings: NodeMetrics[][] = [];
    for (let i = 0; i < 3; i++) {
      if (i) await sleep(smoke ? 200 : 5000);
      readings.push(await Promise.all(nodes.map((n) => metricsOf(n, { gc: true }))));
    }
    if (heapSnapshotDir) await nodes[0]!.heapSnapshot(join(heapSnapshotDir, `${name}-node0-waiting.heapsnapshot`));
    const idleCpu = nodes.map((_, i) => (cpuOf(idleEnd[i]!) - cpuOf(idleStart[i]!)) / windowSeconds);
    const perNodeIdle = nodes.map((node, i) => {
      const n = perNode[i]!;
      const mem = (pick: (m: NodeMetrics) => number) => median(readings.map((r) => pick(r[i]!)));
      return {
        node: node.name,
        seats: n,
        waiting: idleEnd[i]!.waiting,
        connections: idleEnd[i]!.connections,
        fixedCpuUsPerSecond: emptyCpu[i]!,
        idleCpuUsPerSecond: idleCpu[i]!,
        idleCpuUsPerSeatPerSecond: (idleCpu[i]! - emptyCpu[i]!) / n,
        fixedRssMb: before[i]!.rss / 2 ** 20,
        fixedHeapMb: before[i]!.heapUsed / 2 ** 20,
        rssMb: mem((m) => m.rss) / 2 ** 20,
        heapMb: mem((m) => m.heapUsed) / 2 ** 20,
        heapTotalMb: mem((m) => m.heapTotal) / 2 ** 20,
        rssPerSeatKb: (mem((m) => m.rss) - before[i]!.rss) / n / 1024,
        heapPerSeatKb: (mem((m) => m.heapUsed) - before[i]!.heapUsed) / n / 1024,
        heapTotalPerSeatKb: (mem((m) => m.heapTotal) - before[i]!.heapTotal) / n / 1024,
        eldP99Ms: idleEnd[i]!.eldP99Ms,
        eldMaxMs: idleEnd[i]!.eldMaxMs,
        runQueueMsPerSecond: (idleEnd[i]!.runQueueMs - idleStart[i]!.runQueueMs) / windowSeconds,
      };
    });
    const redisIdle = {
      usedMemoryMbEmpty: redisEmpty.usedMemory / 2 ** 20,
      usedMemoryMbRooms: redisRooms.usedMemory / 2 ** 20,
      usedMemoryMb: redisIdleEnd.usedMemory / 2 ** 20,
      rssMb: redisIdleEnd.rss / 2 ** 20,
      bytesPerRoom: (redisRooms.usedMemory - redisEmpty.usedMemory) / rooms,
      bytesPerSeatWaiting: (redisIdleEnd.usedMemory - redisRooms.usedMemory) / seats,
      cpuUsPerSecond: ((redisIdleEnd.cpuSeconds - redisIdleStart.cpuSeconds) * 1e6) / windowSeconds,
      commandsPerSecond: (redisIdleEnd.commands - redisIdleStart.commands) / windowSeconds,
      roundTripsPerSecond: (redisIdleEnd.roundTrips - redisIdleStart.roundTrips) / windowSeconds,
    };
    log(
      `idle: nodes ${perNodeIdle.map((n) => `${n.rssPerSeatKb.toFixed(1)} KB/${n.idleCpuUsPerSeatPerSecond.toFixed(2)} µs/s`).join(", ")}; Redis ${redisIdle.commandsPerSecond.toFixed(0)} commands/s, ${redisIdle.usedMemoryMb.toFixed(0)} MB`,
    );

    // The message load: the chosen rooms' seat a sends once a second, timed to the event of seat b on another node.
    const every = Math.max(1, Math.round(1 / loadShare));
    const sendingRooms = bare ? [] : allRooms.map((_, room) => room).filter((room) => room % every === 0);
    const loadStart = await Promise.all(nodes.map((n) => metricsOf(n, { resetEld: true })));
    const redisLoadStart = await redisInfo();
    t = performance.now();
    await Promise.all(
      clients.map((c, i) => {
        // The client that holds each sending room's seat a (the first seat listed for the room).
        const mine = sendingRooms.filter((room) => (room % nodeCount) % clientCount === i);
        return c.request({ type: "load", rooms: mine, seconds: bare ? 0 : loadSeconds, intervalMs: 1000 }, "loaded");
      }),
    );
    const loadWall = (performance.now() - t) / 1000;
    const loadEnd = await Promise.all(nodes.map((n) => metricsOf(n)));
    const redisLoadEnd = await redisInfo();
    await sleep(smoke ? 1000 : 3000); // the last events and acks
    const reports = await Promise.all(
      clients.map((c) => c.request<{ report: LoadReport }>({ type: "report" }, "report")),
    );
    const latencies = reports.flatMap((r) => r.report.latencies);
    const sum = (pick: (r: LoadReport) => number) => reports.reduce((s, r) => s + pick(r.report), 0);
    const sent = sum((r) => r.sent);
    const received = sum((r) => r.received);
    const load = {
      rooms: sendingRooms.length,
      seconds: loadWall,
      sent,
      received,
      missing: Math.max(0, sent - received),
      duplicates: sum((r) => r.duplicates),
      sendErrors: sum((r) => r.sendErrors),
      ackErrors: sum((r) => r.ackErrors),
      messagesPerSecond: sent / loadWall,
      latency: (() => {
        const s = summarize(latencies);
        return { samples: s.count, p50Ms: s.p50, p99Ms: s.p99, maxMs: s.max };
      })(),
      nodeCpuUsPerSecond: nodes.map((_, i) => (cpuOf(loadEnd[i]!) - cpuOf(loadStart[i]!)) / loadWall),
      nodeEldP99Ms: loadEnd.map((m) => m.eldP99Ms),
      nodeEldMaxMs: loadEnd.map((m) => m.eldMaxMs),
      nodeRunQueueMsPerSecond: loadEnd.map((m, i) => (m.runQueueMs - loadStart[i]!.runQueueMs) / loadWall),
      redisCpuUsPerSecond: ((redisLoadEnd.cpuSeconds - redisLoadStart.cpuSeconds) * 1e6) / loadWall,
      redisCommandsPerSecond: (redisLoadEnd.commands - redisLoadStart.commands) / loadWall,
      redisRoundTripsPerSecond: (redisLoadEnd.roundTrips - redisLoadStart.roundTrips) / loadWall,
    };
    log(
      `load: ${sent} sent, ${received} received, p50 ${load.latency.p50Ms.toFixed(1)} ms, p99 ${load.latency.p99Ms.toFixed(1)} ms, max ${load.latency.maxMs.toFixed(0)} ms`,
    );

    // Idle again.
    const afterStart = await Promise.all(nodes.map((n) => metricsOf(n)));
    await sleep(afterSeconds * 1000);
    const afterEnd = await Promise.all(nodes.map((n) => metricsOf(n)));
    const afterCpu = nodes.map((_, i) => (cpuOf(afterEnd[i]!) - cpuOf(afterStart[i]!)) / afterSeconds);
    const finalStatus = await Promise.all(
      clients.map((c) => c.request<{ status: ClientStatus }>({ type: "status" }, "status")),
    );
    const drops = finalStatus.reduce((s, c) => s + c.status.drops, 0);
    const waitingAtEnd = afterEnd.reduce((s, m) => s + m.waiting, 0);
    const errors = {
      connect: connectErrors,
      drops: drops - connectStatus.reduce((s, c) => s + c.drops, 0),
      send: load.sendErrors,
      ack: load.ackErrors,
      missing: load.missing,
      duplicates: load.duplicates,
      notWaitingAtEnd: seats - waitingAtEnd,
      samples: finalStatus.flatMap((c) => c.status.errorSamples).slice(0, 10),
    };
    const totalErrors =
      errors.connect + errors.drops + errors.send + errors.ack + errors.missing + Math.max(0, errors.notWaitingAtEnd);

    const results = {
      name,
      mode,
      cluster,
      bare,
      container: containerImage ? { image: containerImage, ...manifestLimits() } : undefined,
      seats,
      rooms,
      nodes: nodeCount,
      clients: clientCount,
      command: `pnpm --filter @duet/bench scale ${process.argv.slice(2).join(" ")}`.trim(),
      machine: `${cpus().length} x ${cpus()[0]?.model.trim()}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM; Node ${process.version}`,
      at: new Date().toISOString(),
      loadAverage: { before: loadBefore, after: loadavg()[0]! },
      env: extraEnv,
      roomsSeconds,
      connect: {
        seconds: connectSeconds,
        errors: connectErrors,
        clientSeconds: connectStatus.map((s) => (s.connectedMs ?? 0) / 1000),
      },
      idle: {
        windowSeconds,
        nodes: perNodeIdle,
        redis: redisIdle,
        clientRssMb: finalStatus.map((c) => c.status.rssMb),
      },
      load,
      after: { seconds: afterSeconds, nodeCpuUsPerSecond: afterCpu },
      errors,
      totalErrors,
    };
    const md = writeResults(results);
    if (!quiet) process.stdout.write(md);
    if (totalErrors > 0 || (latencies.length === 0 && !bare)) {
      if (quiet) process.stderr.write(kept.join(""));
      process.stderr.write(md);
      throw new Error(`${totalErrors} errors (${JSON.stringify(errors)})`);
    }
    if (quiet)
      process.stdout.write(
        `bench scale smoke: ${seats} seats on ${nodeCount} nodes, ${sent} messages, 0 errors in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`,
      );
  } finally {
    await Promise.allSettled(clients.map((c) => c.stop()));
    await Promise.allSettled([...setupNodes, ...nodes].map((n) => n.stop()));
    nodePids.clear();
    for (const client of view?.clients ?? []) client.disconnect();
    await redis?.stop();
    await redisCluster?.stop();
    killAll();
  }
}

// Exit explicitly: requests to client processes that failed may leave their timers behind.
main().then(
  () => process.exit(0),
  (error) => {
    if (quiet) process.stderr.write(kept.join(""));
    process.stderr.write(`scale: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
