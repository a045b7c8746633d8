// Scenario 3: N waiting recvs on one node. RSS per waiting recv (after a full GC, at 0 and
// at N, on a fresh node per N), event-loop delay while they wait (a window long enough to
// hold one round of duet's safety re-checks), the node's CPU and Redis load while idle-
// waiting, and the node's Redis connections (CLIENT LIST) at 0 and at N.
import { setMaxListeners } from "node:events";
import type { Redis } from "ioredis";
import { RelayClient, inBatches, type Seat } from "../client.js";
import { duetEnv, startServer } from "../processes.js";
import { sleep } from "../stats.js";
import { commandStats, type CommandStats } from "./redis-cost.js";

export interface CapacityResult {
  waiting: number;
  rssBeforeMb: number;
  rssAtNMb: number;
  rssPerWaitingKb: number;
  heapPerWaitingKb: number;
  eldP50Ms: number;
  eldP99Ms: number;
  eldMaxMs: number;
  /** Share of one core the node spent while the recvs only waited. */
  nodeCpuWhileWaiting: number;
  /** Script calls per second while waiting: the re-checks. */
  redisScriptsPerSecond: number;
  redisConnectionsAt0: number;
  redisConnectionsAtN: number;
  /** Seconds to get all N recvs waiting. */
  rampSeconds: number;
}

/** Connections of duet nodes: ours are named "bench", the ceilings' "ceiling". */
export async function duetConnections(redis: Redis): Promise<number> {
  const list = (await redis.client("LIST")) as string;
  return list.split("\n").filter((line) => line.startsWith("id=") && / name= /.test(line)).length;
}

// Recvs arrive in batches of this many. Their 5 s re-check timers have no jitter, so each
// batch re-reads Redis in step every 5 s: the batch size sets the size of those bursts
// (500 gave bursts that held the loop for 30-130 ms on this machine; see PROFILE.md).
const RAMP_BATCH = 100;

/** One seat's long-poll loop, until aborted. */
async function keepWaiting(client: RelayClient, seat: Seat, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      await client.recv(seat, 25_000, signal);
    } catch {
      if (!signal.aborted) await sleep(100);
    }
  }
}

export async function runCapacity(
  redisUrl: string,
  redis: Redis,
  waiting: number,
  windowMs: number,
): Promise<CapacityResult> {
  const node = await startServer(`duet capacity ${waiting}`, "duet-node.js", { env: duetEnv(redisUrl) });
  const client = new RelayClient(node.url, waiting + 8);
  try {
    const rooms = await inBatches(Math.ceil(waiting / 2), 32, () => client.room());
    const seats: Seat[] = rooms.flat().slice(0, waiting);
    await sleep(200);
    const before = await node.metrics({ gc: true });
    const connectionsAt0 = await duetConnections(redis);
    const abort = new AbortController();
    setMaxListeners(0, abort.signal);
    const recvs: Promise<unknown>[] = [];
    const rampStart = Date.now();
    // In batches, so the listen backlog never overflows into SYN retries.
    for (let i = 0; i < seats.length; i += RAMP_BATCH) {
      // Like a real agent, each seat polls again when its recv answers (a slow ramp on a busy
      // machine can outlast the first recvs' 25 s wait).
      for (const seat of seats.slice(i, i + RAMP_BATCH)) recvs.push(keepWaiting(client, seat, abort.signal));
      const target = Math.min(seats.length, i + RAMP_BATCH);
      for (const deadline = Date.now() + 10_000; (await node.metrics()).waiting < target; await sleep(20)) {
        if (Date.now() > deadline)
          throw new Error(`only ${(await node.metrics()).waiting} of ${target} recvs are waiting`);
      }
    }
    const rampSeconds = (Date.now() - rampStart) / 1000;
    await sleep(300);
    const statsStart: CommandStats = await commandStats(redis);
    const windowStart = await node.metrics({ resetEld: true });
    await sleep(windowMs);
    const windowEnd = await node.metrics();
    const statsEnd = await commandStats(redis);
    const atN = await node.metrics({ gc: true });
    const connectionsAtN = await duetConnections(redis);
    // A few recvs may be between an answer and their next poll.
    if (atN.waiting < waiting * 0.98)
      throw new Error(`recvs stopped waiting during the window (${atN.waiting} of ${waiting})`);
    abort.abort();
    await Promise.allSettled(recvs);
    // Abandoned recvs must free their waits at once (the client went away).
    for (const deadline = Date.now() + 10_000; (await node.metrics()).waiting > 0; await sleep(20)) {
      if (Date.now() > deadline)
        throw new Error(`${(await node.metrics()).waiting} recvs still waiting 10 s after their clients left`);
    }
    const scripts = (statsEnd.evalsha?.calls ?? 0) - (statsStart.evalsha?.calls ?? 0);
    const cpuUs = windowEnd.cpuUserUs + windowEnd.cpuSystemUs - windowStart.cpuUserUs - windowStart.cpuSystemUs;
    return {
      waiting,
      rssBeforeMb: before.rss / 2 ** 20,
      rssAtNMb: atN.rss / 2 ** 20,
      rssPerWaitingKb: (atN.rss - before.rss) / waiting / 1024,
      heapPerWaitingKb: (atN.heapUsed - before.heapUsed) / waiting / 1024,
      eldP50Ms: windowEnd.eldP50Ms,
      eldP99Ms: windowEnd.eldP99Ms,
      eldMaxMs: windowEnd.eldMaxMs,
      nodeCpuWhileWaiting: cpuUs / 1000 / windowMs,
      redisScriptsPerSecond: scripts / (windowMs / 1000),
      redisConnectionsAt0: connectionsAt0,
      redisConnectionsAtN: connectionsAtN,
      rampSeconds,
    };
  } finally {
    await client.close().catch(() => undefined);
    await node.stop();
  }
}
