// Scenario 4: what one message life (send + recv + ack) costs Redis: the commands the node
// sends (round trips), the commands the scripts run inside Redis, the wake publish, and
// Redis CPU, from INFO commandstats and INFO cpu deltas. Measured on a quiet room in three
// shapes (the recv finds the message already there, with the default wait and with wait=0;
// the recv has to wait for it) and under the message-cycle load.
import type { Redis } from "ioredis";
import { RelayClient } from "../client.js";
import type { ServerProcess } from "../processes.js";
import { sleep } from "../stats.js";

export type CommandStats = Record<string, { calls: number; usec: number }>;

export async function commandStats(redis: Redis): Promise<CommandStats> {
  const info = await redis.info("commandstats");
  const stats: CommandStats = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    stats[match[1]!] = { calls: Number(match[2]), usec: Number(match[3]) };
  return stats;
}

export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0);
  return field("used_cpu_sys") + field("used_cpu_user");
}

// Commands a client sends itself; everything else in commandstats ran inside a script.
const ROUND_TRIPS = new Set([
  "evalsha",
  "eval",
  "ssubscribe",
  "sunsubscribe",
  "subscribe",
  "unsubscribe",
  "ping",
  "script|load",
]);
// The bench's own probes.
const OURS = /^(info|client\||config\||pubsub\||hello|select)/;

export interface LifeCost {
  shape: string;
  lives: number;
  /** Commands the node sent per life, by name (evalsha = script calls). */
  roundTrips: Record<string, number>;
  roundTripsTotal: number;
  /** Commands run inside the scripts per life (the wake SPUBLISH counted apart). */
  inScriptCommands: number;
  wakePublishes: number;
  /** Redis's own time in commands per life (commandstats usec of the round trips). */
  redisCommandUs: number;
  /** Redis process CPU per life (INFO cpu), including its event loop and networking. */
  redisCpuUs?: number;
}

export function costOf(
  shape: string,
  lives: number,
  before: CommandStats,
  after: CommandStats,
  cpuSeconds?: number,
): LifeCost {
  const roundTrips: Record<string, number> = {};
  let roundTripsTotal = 0;
  let inScript = 0;
  let wake = 0;
  let usec = 0;
  for (const [name, { calls, usec: time }] of Object.entries(after)) {
    const delta = calls - (before[name]?.calls ?? 0);
    if (delta <= 0 || OURS.test(name)) continue;
    if (ROUND_TRIPS.has(name)) {
      roundTrips[name] = delta / lives;
      roundTripsTotal += delta / lives;
      usec += time - (before[name]?.usec ?? 0);
    } else if (name === "spublish") wake += delta / lives;
    else inScript += delta / lives;
  }
  return {
    shape,
    lives,
    roundTrips,
    roundTripsTotal,
    inScriptCommands: inScript,
    wakePublishes: wake,
    redisCommandUs: usec / lives,
    redisCpuUs: cpuSeconds === undefined ? undefined : (cpuSeconds * 1e6) / lives,
  };
}

/** Message lives on one room, one at a time, in the given shape. */
export async function quietLives(
  node: ServerProcess,
  redis: Redis,
  lives: number,
  onlyFirstShapes = 3,
): Promise<LifeCost[]> {
  const client = new RelayClient(node.url, 4);
  const [a, b] = await client.room();
  const results: LifeCost[] = [];
  const shapes: [string, (i: number) => Promise<void>][] = [
    [
      "recv finds the message (wait=25000)",
      async (i) => {
        await client.send(a, `ready ${i}`);
        const got = await client.recv(b, 25_000);
        await client.ack(
          b,
          got.map((m) => m.id),
        );
      },
    ],
    [
      "recv finds the message (wait=0)",
      async (i) => {
        await client.send(a, `ready ${i}`);
        const got = await client.recv(b, 0);
        await client.ack(
          b,
          got.map((m) => m.id),
        );
      },
    ],
    [
      "recv waits, then is woken",
      async (i) => {
        const recv = client.recv(b, 25_000);
        for (const deadline = Date.now() + 5_000; (await node.metrics()).waiting < 1; )
          if (Date.now() > deadline) throw new Error("recv never waited");
        await sleep(3);
        await client.send(a, `wait ${i}`);
        const got = await recv;
        await client.ack(
          b,
          got.map((m) => m.id),
        );
      },
    ],
  ];
  for (const [shape, life] of shapes.slice(0, onlyFirstShapes)) {
    await life(-1); // warm: scripts loaded, connections open
    await sleep(50);
    const before = await commandStats(redis);
    const cpuBefore = await redisCpuSeconds(redis);
    for (let i = 0; i < lives; i++) await life(i);
    await sleep(50); // the last SUNSUBSCRIBE is sent after the answer
    const after = await commandStats(redis);
    const cpu = (await redisCpuSeconds(redis)) - cpuBefore;
    results.push(costOf(shape, lives, before, after, cpu));
  }
  await client.close();
  return results;
}
