// Redis SIGKILLed and restarted on the same port five times under steady traffic, with
// append-only persistence (appendfsync always, then everysec). Several clients in several
// rooms send with idempotency keys and retry unknown outcomes; the history checker then
// counts acknowledged sends lost, duplicates and requests hung past wait + HUNG_MARGIN_MS (support/history.ts).
// DUET_SOAK=1 runs more rooms, messages and kills.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { checkHistory, History } from "../support/history";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import { startTarget, type RelayTarget } from "../support/targets";
import { median, openRooms, runRoomsWorkload } from "../support/workload";

const SOAK = process.env.DUET_SOAK === "1";
// The short form is sized for CI's two cores, where every lane runs at once.
const ROOMS = SOAK ? 30 : 4;
const MESSAGES_PER_SEAT = SOAK ? 400 : 80;
const KILLS = SOAK ? 25 : 4;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// appendfsync always writes and fsyncs the AOF before answering: a kill loses nothing
// acknowledged. everysec fsyncs once a second in a background thread, and while that fsync
// is still running (a busy disk: one CI run under heavy load) Redis answers without writing
// the AOF at all, for up to 2 s. A kill then loses the tail of acknowledged writes: sends,
// acks, idempotency records (never an id: the next message gets a new one). So
// with everysec the checker is told the kills, and each undone write must be explained by
// one: a kill came after it, and nothing acknowledged after it and before that kill
// survived. Every send must still end acknowledged; nothing may be stored twice or hang.
// See docs/reliability.md.
describe.each(["always", "everysec"])("Redis SIGKILL and restart under traffic (appendfsync %s)", (fsync) => {
  let redis: SpawnedRedis;
  let target: RelayTarget;
  let dataDir: string;
  const persistence = ["--appendonly", "yes", "--appendfsync", fsync];

  beforeAll(async () => {
    // The data directory outlives each killed server, so it is ours, not the fixture's.
    dataDir = mkdtempSync(join(tmpdir(), "duet-redis-aof-"));
    redis = await spawnRedis([...persistence, "--dir", dataDir]);
    target = await startTarget("redis-3-nodes", { REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: "1000" });
  });
  afterAll(async () => {
    await target?.close();
    await redis?.stop("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    `loses no acknowledged send, stores none twice and hangs no request across ${KILLS} kills`,
    async () => {
      const history = new History();
      // The relay nodes share this process with the clients: a busy event loop delays both,
      // and shows in the durations the checker measures. Reported beside them.
      const loopDelay = monitorEventLoopDelay({ resolution: 10 });
      loopDelay.enable();
      // A guard against a hang, not a bound: the verdict counts messages, and a busy machine
      // only makes the run longer.
      const deadline = Date.now() + (SOAK ? 600_000 : 240_000);
      const rooms = await openRooms(target.client, ROOMS, deadline);
      let trafficDone = false;
      const traffic = runRoomsWorkload(rooms, {
        client: target.client,
        history,
        messagesPerSeat: MESSAGES_PER_SEAT,
        recvWaitMs: 2000,
        sendGapMs: 20,
        deadline,
      }).finally(() => (trafficDone = true));

      // Each kill waits for traffic to move on (a share of all the sends acknowledged since
      // the one before), not for a time: however fast this machine runs the workload, every
      // kill lands while traffic flows, and the kills end before the traffic can.
      const acknowledged = () => history.operations.filter((o) => o.kind === "send" && o.status === 200).length;
      const sendsBetweenKills = Math.floor((ROOMS * 2 * MESSAGES_PER_SEAT) / (KILLS + 2));
      const downMs: number[] = [];
      const kills: { issuedAt: number; restartedAt: number }[] = [];
      for (let kill = 0; kill < KILLS; kill++) {
        const from = acknowledged();
        while (acknowledged() - from < sendsBetweenKills && !trafficDone) await sleep(20);
        await sleep(Math.random() * 200);
        const exited = new Promise((resolve) => redis.process.once("exit", resolve));
        const issuedAt = history.now();
        redis.process.kill("SIGKILL");
        await exited;
        const killedAt = Date.now();
        await sleep(200);
        // Same port, same data directory: the AOF is replayed on start.
        redis = await spawnRedis([...persistence, "--dir", dataDir], redis.port);
        kills.push({ issuedAt, restartedAt: history.now() });
        downMs.push(Date.now() - killedAt);
      }
      // Every kill landed while traffic was flowing.
      expect(trafficDone).toBe(false);
      await traffic;
      const trafficEndedAt = Date.now();
      loopDelay.disable();

      // Only everysec may lose acknowledged writes to a kill.
      const result = checkHistory(history, fsync === "everysec" ? { kills } : {});
      const sends = history.operations.filter((o) => o.kind === "send");
      const figures = {
        appendfsync: fsync,
        rooms: ROOMS,
        kills: KILLS,
        medianDownMs: median(downMs),
        sendAttempts: sends.length,
        acknowledgedSends: result.acknowledgedSends,
        expectedSends: ROOMS * 2 * MESSAGES_PER_SEAT,
        lost: result.lost,
        undoneByKill: result.undoneByKill,
        undoneByKillExamples: result.undoneByKillExamples,
        duplicates: result.duplicates,
        redeliveredAfterAck: result.redeliveredAfterAck,
        hungPastBound: result.hung,
        hungExamples: result.hungExamples,
        eventLoopDelayP99Ms: Math.round(loopDelay.percentile(99) / 1e6),
        eventLoopDelayMaxMs: Math.round(loopDelay.max / 1e6),
        unknownOutcomes: result.unknownOutcomes,
        unknownSendsResolvedByRetry: result.unknownResolved,
        status503: history.operations.filter((o) => o.status === 503).length,
        operations: result.operations,
      };
      console.log(`FIGURES redis-kill ${JSON.stringify(figures)}`);
      expect(result.violations).toEqual([]);
      // Every send acknowledged (counted by text: a lost send's id can be minted again); if
      // not, name the ones that never were and how their last attempt ended, and every 404/409
      // the clients saw (a room ended early stops its senders).
      const acknowledgedTexts = new Set(sends.filter((o) => o.outcome === "ok").map((o) => o.text));
      const lastAttempt = new Map(
        sends.filter((o) => !acknowledgedTexts.has(o.text)).map((o) => [o.text, `${o.outcome} ${o.status}`]),
      );
      const endedOrRefused = history.operations
        .filter((o) => o.status === 404 || o.status === 409)
        .map((o) => `${o.kind} ${o.status}`);
      // The traffic's deadline cuts senders off mid-sequence: say so when it was reached.
      expect({
        acknowledged: result.acknowledgedSends,
        neverAcknowledged: [...lastAttempt].slice(0, 10),
        endedOrRefused: endedOrRefused.slice(0, 10),
        deadlineReached: trafficEndedAt >= deadline,
      }).toEqual({
        acknowledged: ROOMS * 2 * MESSAGES_PER_SEAT,
        neverAcknowledged: [],
        endedOrRefused: [],
        deadlineReached: false,
      });
      // always: nothing acknowledged is undone. everysec: what was is explained by a kill
      // (result.violations above holds every loss and redelivery that is not, any reused id and
      // any message a client resuming after the last id it saw would skip).
      if (fsync === "always")
        expect({ lost: result.lost, undoneByKill: result.undoneByKill }).toEqual({ lost: 0, undoneByKill: 0 });
      expect(result.duplicates).toBe(0);
      expect(result.hung).toBe(0);
      // The faults really happened and were seen by clients.
      expect(figures.status503 + result.unknownOutcomes).toBeGreaterThan(0);
    },
    SOAK ? 700_000 : 300_000,
  );
});

describe("Redis SIGKILL and restart without persistence", () => {
  it("every room is gone and says so (404 not_found, never 5xx); new rooms work at once", async () => {
    let redis = await spawnRedis();
    const target = await startTarget("redis", { REDIS_URL: redis.url, REDIS_COMMAND_TIMEOUT_MS: "1000" });
    try {
      const { client } = target;
      const rooms = await Promise.all(Array.from({ length: 20 }, () => client.pairedRoom()));
      for (const room of rooms) expect((await client.send(room.code, room.a, "before")).status).toBe(200);
      const exited = new Promise((resolve) => redis.process.once("exit", resolve));
      redis.process.kill("SIGKILL");
      await exited;
      redis = await spawnRedis([], redis.port);
      // Ready again once the relay has reconnected: waited for, however long the machine takes.
      while ((await client.call("GET", "/readyz")).status !== 200) await sleep(50);
      const statuses = new Map<string, number>();
      for (const room of rooms) {
        for (const reply of [
          await client.recv(room.code, room.b, 0),
          await client.send(room.code, room.a, "after", "k"),
          await client.status(room.code, room.a),
        ]) {
          const key = `${reply.status} ${reply.body.error ?? ""}`.trim();
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
        }
      }
      console.log(
        `FIGURES redis-kill-no-persistence ${JSON.stringify({ rooms: rooms.length, answers: Object.fromEntries(statuses) })}`,
      );
      expect(Object.fromEntries(statuses)).toEqual({ "404 not_found": rooms.length * 3 });
      expect((await client.pairedRoom()).code).toBeDefined();
    } finally {
      await target.close();
      await redis.stop("SIGKILL");
    }
  }, 120_000);
});
