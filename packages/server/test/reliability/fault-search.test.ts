// A randomized search for lost acknowledged changes: a seeded schedule of failures against a
// Sentinel deployment (a master, two replicas, three sentinels, down-after 1 s, AOF on as
// docs/high-availability.md recommends) with REDIS_WRITE_ACK_REPLICAS=all, under the
// failover test's workload (two relays; in every room both seats send keyed messages,
// long-poll, ack, and retry unknown outcomes). The history checker (support/history.ts)
// then reads every call: each acknowledged send received, none twice, no acknowledged ack
// undone, nothing received that nobody sent, no id given to two messages.
//
// Each round draws one fault from the seeded generator, with its timings:
//   kill-master          SIGKILL; restarted as a replica once Sentinel has promoted another,
//                        from its own directory (AOF, or the RDB of its last full sync) or empty
//   kill-master-quick    SIGKILL and restarted at once, as a master, from its own AOF
//   stop-master          SIGSTOP past down-after, SIGCONT after a drawn delay (before, during
//                        or after the failover)
//   sentinel-failover    SENTINEL FAILOVER, sometimes with the sentinel that runs it stopped
//                        for a while right after (Sentinel slow at high load)
//   kill-replica         SIGKILL of a replica, restarted after a drawn delay, empty or not
//   restart-relay        one relay stopped and started again on its port
//   stop-sentinel        one sentinel SIGSTOPped for a drawn time, then another fault
//   failover-sentinels-starved  SENTINEL FAILOVER, and every sentinel SIGSTOPped as soon as
//                        a replica answers as the new master (a load spike that starves them
//                        all at once: they resume in TILT), for a drawn time
//   failover-stalled-promoted   the same, once a sentinel announces +promoted-slave: the
//                        leader then finishes the failover after TILT
// DUET_FAULT_SEARCH_KINDS=a,b narrows the draw; kill-master-quick-empty (restarted at once
// from an EMPTY disk, as a master) can be asked for there: it is outside the promise
// (docs/high-availability.md) and loses everything, as redis.io's replication page warns.
//
// Short form (CI): 3 rounds. DUET_FAULT_SEARCH_FAILOVERS=n (the long form): rounds until the
// settled master has changed n times (at most 4n rounds).
// DUET_FAULT_SEARCH_SEED=s replays a schedule (the seed is printed at the start and in
// every failure); on a loaded machine the same schedule meets different timings. The report
// goes to test/reliability/results/fault-search.json with the long form.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ask, spawnSentinelTopology, type SpawnedSentinelTopology } from "@duet/testkit";
import { Redis } from "ioredis";
import { checkHistory, History } from "../support/history";
import { Relays } from "../support/relays";
import { openRooms } from "../support/workload";

const LONG = process.env.DUET_FAULT_SEARCH_FAILOVERS !== undefined;
/** The long form draws faults until this many failovers (the settled master changed) happened. */
const FAILOVERS = Number(process.env.DUET_FAULT_SEARCH_FAILOVERS ?? 0);
/** The short form's rounds; the long form's most (a guard: not every fault fails over). */
const ROUNDS = LONG ? Math.max(4 * FAILOVERS, 4) : 3;
const SEED = Number(process.env.DUET_FAULT_SEARCH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const ROOMS = 4;
const REPORT_FILE = process.env.DUET_FAULT_SEARCH_REPORT ?? join(__dirname, "results", "fault-search.json");
/**
 * The longest a sentinel is stopped. Past 2 s a sentinel enters TILT when it resumes and
 * acts on nothing for 30 s: the long form draws that, the short form stays under it.
 */
const SENTINEL_STOP_MS = LONG ? 15_000 : 1800;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const ROUND_GUARD_MS = 300_000;
/** Runs `step`, or throws once `ms` have passed without it settling. */
async function within<T>(ms: number, what: string, step: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([step(), guard]);
  } finally {
    clearTimeout(timer);
  }
}

/** mulberry32: a small seeded generator, so that a seed names a schedule. */
function generator(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    between: (low: number, high: number) => Math.round(low + next() * (high - low)),
    pick: <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!,
    chance: (p: number) => next() < p,
  };
}
type Generator = ReturnType<typeof generator>;

const SAFE_KINDS = [
  "kill-master",
  "kill-master-quick",
  "stop-master",
  "sentinel-failover",
  "kill-replica",
  "restart-relay",
  "stop-sentinel",
  "failover-sentinels-starved",
  "failover-stalled-promoted",
] as const;
const OUTSIDE_PROMISE = ["kill-master-quick-empty"] as const;
type Kind = (typeof SAFE_KINDS)[number] | (typeof OUTSIDE_PROMISE)[number];
const KINDS: Kind[] = process.env.DUET_FAULT_SEARCH_KINDS
  ? (process.env.DUET_FAULT_SEARCH_KINDS.split(",") as Kind[])
  : [...SAFE_KINDS];
for (const kind of KINDS)
  if (![...SAFE_KINDS, ...OUTSIDE_PROMISE].includes(kind)) throw new Error(`unknown fault kind ${kind}`);

interface Event {
  at: number;
  what: string;
}

/** The faults, on one topology; every step is logged on the history's clock. */
class Faults {
  readonly events: Event[] = [];
  constructor(
    readonly topology: SpawnedSentinelTopology,
    readonly relays: Relays,
    readonly history: History,
    readonly random: Generator,
  ) {}

  log(what: string) {
    this.events.push({ at: Math.round(this.history.now()), what });
  }

  private async master() {
    const master = await this.topology.master();
    this.log(`master is ${master.port}`);
    return master;
  }

  private async replicas(masterPort: number) {
    const info = await ask(masterPort, (c) => c.info("replication"));
    return [...(info ?? "").matchAll(/slave\d+:ip=[^,]+,port=(\d+)/g)].map((m) => Number(m[1]));
  }

  /**
   * Waits for the sentinels to agree on a master other than `port`. A failover may not
   * happen at all (a sentinel in TILT, a failover aborted and the old master kept): that
   * is an outcome to check, not a harness failure, unless `required` (the master is dead).
   */
  private async waitForNewMaster(port: number, required: boolean) {
    try {
      const promoted = await this.topology.waitForNewMaster(port, required ? 120_000 : 45_000);
      this.log(`sentinels agree on ${promoted}`);
    } catch (error) {
      if (required) throw error;
      this.log(`no failover: the sentinels still agree on ${await this.topology.masterPort()}`);
    }
  }

  /** Sends SENTINEL FAILOVER to sentinel `i`; retries while a previous failover settles. */
  private async sentinelFailover(i: number) {
    const sentinel = this.topology.sentinelProcesses[i]!;
    for (const deadline = Date.now() + 30_000; ; await sleep(250)) {
      const answer = await ask(sentinel.port, (c) =>
        c.call("SENTINEL", "FAILOVER", this.topology.name).catch((e: Error) => e.message),
      );
      if (answer === "OK") return this.log(`SENTINEL FAILOVER via sentinel ${sentinel.port}`);
      if (Date.now() > deadline) throw new Error(`SENTINEL FAILOVER kept failing: ${String(answer)}`);
    }
  }

  private stopFor(process: { kill(signal: NodeJS.Signals): boolean }, name: string, ms: number) {
    process.kill("SIGSTOP");
    this.log(`SIGSTOP ${name} for ${ms} ms`);
    return sleep(ms).then(() => {
      process.kill("SIGCONT");
      this.log(`SIGCONT ${name}`);
    });
  }

  async run(kind: Kind) {
    const random = this.random;
    this.log(`fault ${kind}`);
    switch (kind) {
      case "kill-master": {
        const master = await this.master();
        master.process.kill("SIGKILL");
        this.log(`SIGKILL master ${master.port}`);
        await this.waitForNewMaster(master.port, true);
        const empty = random.chance(0.5);
        await sleep(random.between(0, 2000));
        await this.topology.restart(master.port, { empty });
        this.log(`restarted ${master.port} as a replica${empty ? ", empty" : " from its directory"}`);
        break;
      }
      case "kill-master-quick":
      case "kill-master-quick-empty": {
        const master = await this.master();
        const empty = kind === "kill-master-quick-empty";
        master.process.kill("SIGKILL");
        this.log(`SIGKILL master ${master.port}`);
        await sleep(random.between(0, 800));
        await this.topology.restart(master.port, { as: "master", empty });
        this.log(`restarted ${master.port} at once as a master${empty ? ", empty" : " from its AOF"}`);
        break;
      }
      case "stop-master": {
        const master = await this.master();
        await this.stopFor(master.process, `master ${master.port}`, random.between(1200, 8000));
        break;
      }
      case "sentinel-failover": {
        const master = await this.master();
        const i = random.between(0, 2);
        const slow = random.chance(0.5) ? random.between(500, SENTINEL_STOP_MS) : 0;
        const stopAfter = random.between(0, 400);
        await this.sentinelFailover(i);
        if (slow) {
          await sleep(stopAfter);
          await this.stopFor(this.topology.sentinelProcesses[i]!.process, `sentinel ${i} (running the failover)`, slow);
        }
        await this.waitForNewMaster(master.port, false);
        break;
      }
      case "failover-sentinels-starved": {
        const master = await this.master();
        const replicas = await this.replicas(master.port);
        await this.sentinelFailover(random.between(0, 2));
        let promoted: number | undefined;
        for (const deadline = Date.now() + 20_000; promoted === undefined && Date.now() < deadline; await sleep(20))
          for (const port of replicas)
            if ((await ask(port, (c) => c.info("replication")))?.includes("role:master")) promoted = port;
        this.log(promoted === undefined ? "no replica promoted" : `replica ${promoted} answers as a master`);
        const ms = random.between(Math.min(3000, SENTINEL_STOP_MS), SENTINEL_STOP_MS);
        await Promise.all(
          this.topology.sentinelProcesses.map((sentinel, i) => this.stopFor(sentinel.process, `sentinel ${i}`, ms)),
        );
        await this.waitForNewMaster(master.port, false);
        break;
      }
      case "failover-stalled-promoted": {
        // The CI loss's shape: the failover's leader has seen its replica promoted, and then
        // every sentinel stalls (a load spike) before the others are moved; back from TILT the
        // leader finishes it. Meanwhile the old master still takes changes.
        const master = await this.master();
        const subscribers = this.topology.sentinelProcesses.map(
          (sentinel) =>
            new Redis({ port: sentinel.port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 1 }),
        );
        try {
          const promoted = new Promise<string>((resolve) => {
            for (const subscriber of subscribers) subscriber.on("message", (_channel, text: string) => resolve(text));
          });
          await Promise.all(subscribers.map((s) => s.connect().then(() => s.subscribe("+promoted-slave"))));
          await this.sentinelFailover(random.between(0, 2));
          const seen = await Promise.race([promoted, sleep(20_000).then(() => undefined)]);
          const ms = random.between(Math.min(3000, SENTINEL_STOP_MS), SENTINEL_STOP_MS);
          if (seen === undefined) this.log("no +promoted-slave within 20 s");
          else
            await Promise.all(
              this.topology.sentinelProcesses.map((sentinel, i) =>
                this.stopFor(sentinel.process, `sentinel ${i} (after +promoted-slave ${seen})`, ms),
              ),
            );
        } finally {
          for (const subscriber of subscribers) subscriber.disconnect();
        }
        await this.waitForNewMaster(master.port, false);
        break;
      }
      case "kill-replica": {
        const master = await this.master();
        const port = random.pick(await this.replicas(master.port));
        if (port === undefined) break;
        this.topology.nodes.get(port)!.process.kill("SIGKILL");
        this.log(`SIGKILL replica ${port}`);
        const empty = random.chance(0.5);
        await sleep(random.between(0, 4000));
        await this.topology.restart(port, { empty });
        this.log(`restarted ${port} as a replica${empty ? ", empty" : " from its directory"}`);
        break;
      }
      case "restart-relay": {
        const i = random.between(0, 1);
        this.log(`restarting relay ${i}`);
        await this.relays.restart(i);
        this.log(`relay ${i} ready`);
        break;
      }
      case "stop-sentinel": {
        const i = random.between(0, 2);
        const stopped = this.stopFor(
          this.topology.sentinelProcesses[i]!.process,
          `sentinel ${i}`,
          random.between(500, Math.min(6000, SENTINEL_STOP_MS)),
        );
        await sleep(random.between(0, 1000));
        const next = random.pick(["kill-master", "stop-master", "sentinel-failover"] as const);
        await this.run(next);
        await stopped;
        break;
      }
    }
  }

  /** Every process running, a majority agreeing on a master, both replicas online and known. */
  async settle() {
    for (const node of this.topology.nodes.values()) node.process.kill("SIGCONT");
    for (const sentinel of this.topology.sentinelProcesses) sentinel.process.kill("SIGCONT");
    await this.topology.waitForReplicas(2, 90_000);
    this.log(`settled: master ${await this.topology.masterPort()} with 2 replicas`);
  }
}

describe("fault search: write-ack all on Sentinel", () => {
  let topology: SpawnedSentinelTopology;
  beforeAll(async () => {
    topology = await spawnSentinelTopology({
      downAfterMs: 1000,
      failoverTimeoutMs: 5000,
      nodeArgs: ["--appendonly", "yes", "--appendfsync", "everysec"],
      // Redis's own account of a failover (+switch-master, +convert-to-slave, full syncs): to read after a loss.
      logFile: process.env.DUET_FAULT_SEARCH_REDIS_LOG,
    });
  }, 120_000);
  afterAll(async () => {
    await topology?.stop();
  });

  it(
    `loses nothing acknowledged across ${LONG ? `${FAILOVERS} failovers` : `${ROUNDS} drawn faults`} (seed ${SEED})`,
    async () => {
      const testStart = performance.now();
      console.log(`FIGURES fault-search seed ${SEED}: replay with DUET_FAULT_SEARCH_SEED=${SEED}`);
      const random = generator(SEED);
      const relays = new Relays();
      await relays.start({
        REDIS_SENTINELS: topology.sentinels,
        REDIS_SENTINEL_NAME: topology.name,
        REDIS_WRITE_ACK_REPLICAS: "all",
        REDIS_WRITE_ACK_TIMEOUT_MS: "500",
      });
      const history = new History();
      console.log(`FIGURES fault-search relays ready at ${Math.round(performance.now() - testStart)} ms`);
      const faults = new Faults(topology, relays, history, random);
      const kinds: Kind[] = [];
      let failovers = 0;
      let harnessError: Error | undefined;
      try {
        // A guard against a hang: traffic stops once the rounds are done.
        const deadline = Date.now() + 120_000 + ROUNDS * 90_000;
        const rooms = await openRooms(relays.client, ROOMS, deadline);
        let faultsDone = false;
        const traffic = relays.traffic(rooms, history, deadline, () => faultsDone);
        try {
          for (
            let round = 0;
            round < ROUNDS && harnessError === undefined && (!LONG || failovers < FAILOVERS);
            round++
          ) {
            await sleep(random.between(300, 1500));
            const kind = random.pick(KINDS);
            kinds.push(kind);
            const faultAt = history.now();
            const masterBefore = await topology.masterPort();
            // A guard against a harness hang (the history is checked all the same), not a bound.
            await within(ROUND_GUARD_MS, `round ${round} (${kind})`, async () => {
              await faults.run(kind);
              await faults.settle();
            });
            if ((await topology.masterPort()) !== masterBefore) failovers++;
            // Recovered: a change that started after the fault succeeded (a guard of 60 s).
            for (const until = Date.now() + 60_000; Date.now() < until; await sleep(50)) {
              const recovered = history.operations.some(
                (o) => (o.kind === "send" || o.kind === "ack") && o.outcome === "ok" && o.startedAt > faultAt,
              );
              if (recovered) break;
            }
          }
          await sleep(1000);
        } catch (error) {
          // The history is checked all the same; the test then fails with this error too.
          harnessError = error as Error;
          faults.log(`harness error: ${harnessError.message}`);
          await faults.settle().catch(() => undefined);
        } finally {
          faultsDone = true;
        }
        await traffic;
        faults.log("traffic drained");
      } finally {
        await relays.close();
        faults.log("relays closed");
      }

      const result = checkHistory(history);
      // Where the lost ones sit on the clock of the events: what to read first.
      const received = new Set(
        history.operations
          .flatMap((o) => (o.kind === "recv" && o.outcome === "ok" ? o.messages! : []))
          .map((m) => m.text),
      );
      const lostSends = history.operations
        .filter((o) => o.kind === "send" && o.outcome === "ok" && !received.has(o.text!))
        .map((o) => `${o.room} ${o.text} id ${o.id} ${Math.round(o.startedAt)}-${Math.round(o.endedAt)} ms`);
      const counts = Object.fromEntries(KINDS.map((k) => [k, kinds.filter((x) => x === k).length]));
      const report = {
        seed: SEED,
        rounds: kinds.length,
        failovers,
        kinds: counts,
        acknowledgedSends: result.acknowledgedSends,
        lost: result.lost,
        acksUndone: result.redeliveredAfterAck,
        duplicates: result.duplicates,
        idsReused: result.idsReused,
        unverified: result.unverified,
        skippedOnResume: result.skippedOnResume,
        status503: history.operations.filter((o) => o.status === 503).length,
        operations: result.operations,
        violations: result.violations.slice(0, 20),
        lostSends: lostSends.slice(0, 20),
        relayErrors: relays.errors.slice(0, 5),
        harnessError: harnessError?.message,
        events: faults.events,
      };
      console.log(`FIGURES fault-search ${JSON.stringify(report)}`);
      if (LONG || result.violations.length > 0) {
        mkdirSync(dirname(REPORT_FILE), { recursive: true });
        writeFileSync(LONG ? REPORT_FILE : `${REPORT_FILE}.failed`, `${JSON.stringify(report, null, 2)}\n`);
      }
      // The promise (docs/high-availability.md), one failure at a time.
      expect({ seed: SEED, violations: result.violations.slice(0, 10) }).toEqual({ seed: SEED, violations: [] });
      expect(result.acknowledgedSends).toBeGreaterThan(0);
      if (harnessError) throw harnessError;
    },
    180_000 + ROUNDS * 120_000,
  );
});
