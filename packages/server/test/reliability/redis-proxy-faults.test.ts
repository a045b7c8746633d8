// Faults on the network between the relay nodes and Redis, injected by a loopback TCP
// proxy: Redis unreachable for 10 s (a black hole: connections stay open, nothing comes
// back), and every connection reset while sends are in flight.
import { Redis } from "ioredis";
import { checkHistory, History, isHung, type Operation } from "../support/history";
import { startTarget } from "../support/targets";
import {
  asClient,
  median,
  openRooms,
  openRoomWithRetry,
  percentile,
  runRoomsWorkload,
  runRoomWorkload,
} from "../support/workload";
import { ownRedis } from "../support/own-redis";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const COMMAND_TIMEOUT_MS = 1000;

/**
 * The port (on the proxy's side) of the subscriber connection a waiting recv made visible
 * (ssub=1 in CLIENT LIST); undefined when none shows within 5 s.
 */
async function subscriberPortOf(admin: Redis): Promise<number | undefined> {
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(25)) {
    const list = (await admin.call("CLIENT", "LIST")) as string;
    const line = list.split("\n").find((l) => / ssub=1 /.test(l));
    if (line) return Number(/ addr=[^ ]+:(\d+) /.exec(line)![1]);
  }
  return undefined;
}

describe("faults between the nodes and Redis (TCP proxy)", () => {
  // Rate limits on (counted in Redis, as in production), high enough never to refuse:
  // their Redis calls are on every request's path too.
  const own = ownRedis({
    kind: "redis-3-nodes",
    env: {
      REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
      RATE_LIMIT_REQUESTS: "1000000",
      RATE_LIMIT_ROOMS: "1000000",
    },
    proxy: true,
    each: true,
  });

  it("Redis unreachable for 10 s: every request answers 503 or succeeds, none hangs; recovery within 4 s of Redis returning (about 1 s quiet)", async () => {
    const { client } = own.target;
    const history = new History();
    const rooms = await openRooms(client, 3, Date.now() + 10_000);
    // Recovery is probed in a room of its own, outside the history.
    const probeRoom = await openRoomWithRetry(client, Date.now() + 10_000);
    const blackholeMs = 10_000;
    // A hang guard only: the traffic ends when every message is sent and received (about
    // 30 s); a send the guard cut off is reported unverified, not lost (history.ts).
    const deadline = Date.now() + 150_000;
    // Steady traffic in the rooms, plus a prober doing every kind of call.
    const traffic = runRoomsWorkload(rooms, {
      client,
      history,
      messagesPerSeat: 100,
      recvWaitMs: 1000,
      sendGapMs: 50,
      deadline,
    });
    const probes: Operation[] = [];
    let probing = true;
    const prober = (async () => {
      const room = rooms[0]!;
      // [name, call, statuses that are a correct answer besides 503]
      const calls: [string, () => Promise<{ status: number }>, number[]][] = [
        ["open", () => client.open(), [200]],
        ["join", () => client.join(room.code), [409]], // the room is full
        ["status", () => client.status(room.code, room.a), [200]],
        ["stats", () => client.stats(), [200]],
        ["recv", () => client.recv(room.code, room.a, 500), [200]],
        ["readyz", () => client.call("GET", "/readyz"), [200]],
      ];
      for (let i = 0; probing; i++) {
        const startedAt = history.now();
        const [label, call, expected] = calls[i % calls.length]!;
        let status = 0;
        try {
          status = (await call()).status;
        } catch {
          status = 0;
        }
        // A correct refusal (join of a full room) is as good as a 200 here.
        const shown = expected.includes(status) ? 200 : status;
        probes.push({
          kind: "recv",
          label,
          room: "probe",
          seat: "a",
          outcome: History.outcomeOf(shown),
          status: shown,
          startedAt,
          endedAt: history.now(),
          waitMs: label === "recv" ? 500 : 0,
        });
        await sleep(20);
      }
    })();

    await sleep(1500);
    own.proxy.blackhole();
    const blackholeStarted = history.now();
    await sleep(blackholeMs);
    own.proxy.resume();
    const resumedAt = Date.now();
    const resumedAtHistory = history.now();
    // Recovery: the first send that succeeds after Redis returns, less the time this
    // process's event loop was held meanwhile (the relays run in it: their timers wait too).
    let recoveredInMs = Infinity;
    let stalledMs = 0;
    // Probed for 10 s of the relay's own time (stalls not counted), 120 s at most.
    const probedFor = () => history.now() - resumedAtHistory - history.stalls.within(resumedAtHistory, history.now());
    for (let attempt = 0; probedFor() < 10_000 && Date.now() - resumedAt < 120_000; await sleep(25)) {
      const reply = await client
        .send(probeRoom.code, probeRoom.a, `probe ${attempt++}`, `probe-${attempt}`)
        .catch(() => undefined);
      if (reply?.status === 200) {
        const at = history.now();
        stalledMs = history.stalls.within(resumedAtHistory, at);
        recoveredInMs = at - resumedAtHistory - stalledMs;
        break;
      }
    }
    await sleep(1000);
    probing = false;
    await prober;
    await traffic;

    const all = [...history.operations, ...probes];
    const during = all.filter((o) => o.startedAt >= blackholeStarted && o.startedAt < resumedAtHistory);
    const statuses = new Map<number, number>();
    for (const op of during) statuses.set(op.status, (statuses.get(op.status) ?? 0) + 1);
    const failDurations = during.filter((o) => o.status === 503).map((o) => o.endedAt - o.startedAt);
    const hung = all.filter((o) => isHung(history, o));
    const unexpected = all.filter(
      (o) => ![200, 503].includes(o.status) && !(o.status === 429 && o.error === "mailbox_full"),
    );
    const result = checkHistory(history);
    const figures = {
      blackholeMs,
      requestsDuringBlackhole: during.length,
      statusesDuringBlackhole: Object.fromEntries(statuses),
      median503Ms: median(failDurations),
      p99_503Ms: percentile(failDurations, 99),
      max503Ms: Math.max(...failDurations),
      hungPastBound: hung.length,
      unexpectedStatuses: unexpected.length,
      recoveredInMs,
      stalledMs,
      acknowledgedSends: result.acknowledgedSends,
      lost: result.lost,
      duplicates: result.duplicates,
    };
    console.log(`FIGURES redis-blackhole ${JSON.stringify(figures)}`);
    expect(
      hung.map((o) => `${o.label ?? o.kind} ${o.status} ${Math.round(o.endedAt - o.startedAt)}ms wait ${o.waitMs}`),
    ).toEqual([]);
    expect(unexpected.map((o) => `${o.label ?? o.kind} ${o.status} ${o.error}`)).toEqual([]);
    expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
    // The bound is the feature (docs/reliability.md): a dropped connection is remade at
    // once, and a set-up that Redis does not answer is dropped after 1 s of silence and
    // tried again within 1 s (the reconnect backoff's cap), so a node serves again within
    // about 2 s of Redis returning (36-76 ms typically: a set-up held in the black hole
    // completes as soon as the bytes flow). Without the heartbeat a node waits for TCP's
    // retransmission backoff: 5 s and more.
    if (recoveredInMs >= 4000)
      throw new Error(
        `first send served ${Math.round(recoveredInMs)} ms after Redis returned (event-loop stalls of ${Math.round(stalledMs)} ms not counted): the heartbeat or the reconnect did not act (bound 4,000 ms)`,
      );
    expect(result.violations).toEqual([]);
  }, 200_000);

  // Messages per seat in the reset test's rooms (3 keyed, 3 without a key).
  const RESET_MESSAGES = 40;

  it("connections reset during sends: a retry with the same key resolves to exactly one id; without a key no send is stored twice", async () => {
    const { client } = own.target;
    const history = new History();
    // A guard against a hang, not a bound: the verdict counts messages, and a busy machine
    // only makes the run longer.
    const deadline = Date.now() + 240_000;
    const keyed = await openRooms(client, 3, deadline);
    const unkeyed = await openRooms(client, 3, deadline);
    const admin = new Redis(own.redis.url);
    // Read as a client would: a 503 (Redis's connection just reset) is retried after Retry-After.
    const statsBefore = (await asClient(() => client.stats())).body;
    let resetting = true;
    let resets = 0;
    const resetter = (async () => {
      while (resetting && resets < 40) {
        await sleep(100 + Math.random() * 150);
        own.proxy.resetAll();
        resets++;
      }
    })();
    // Keyed rooms retry an unknown send with its key. Without a key an unknown outcome is not
    // retried (it cannot be, safely); the checker still requires that no text is stored twice
    // and that nothing is lost that returned an id.
    const traffic = Promise.all(
      [
        ...keyed.map((room) => ({ room, idempotent: true })),
        ...unkeyed.map((room) => ({ room, idempotent: false })),
      ].map(({ room, idempotent }) =>
        runRoomWorkload(room, {
          client,
          history,
          messagesPerSeat: RESET_MESSAGES,
          recvWaitMs: 1000,
          sendGapMs: 5,
          deadline,
          idempotent,
        }),
      ),
    );
    await traffic;
    resetting = false;
    await resetter;
    const statsReply = await asClient(() => client.stats());
    expect(statsReply.status).toBe(200);
    const statsAfter = statsReply.body;
    admin.disconnect();

    const result = checkHistory(history);
    const sends = history.operations.filter((o) => o.kind === "send");
    const unkeyedCodes = new Set(unkeyed.map((room) => room.code));
    const unkeyedSends = sends.filter((o) => unkeyedCodes.has(o.room));
    const unkeyedReceived = new Set(
      history.operations
        .filter((o) => o.kind === "recv" && o.outcome === "ok" && unkeyedCodes.has(o.room))
        .flatMap((o) => (o.messages ?? []).map((m) => m.text)),
    );
    const unkeyedOk = unkeyedSends.filter((o) => o.outcome === "ok").length;
    const unkeyedUnknown = unkeyedSends.filter((o) => o.outcome === "unknown").length;
    // The server's tally counts one per script run that stored a message. If anything
    // (ioredis, the server) ran a send twice, stored would exceed distinct texts.
    const storedByTally = statsAfter.messages - statsBefore.messages;
    const figures = {
      resets,
      sendAttempts: sends.length,
      unknownSends: sends.filter((o) => o.outcome === "unknown").length,
      keyedUnknownResolvedByRetry: result.unknownResolved,
      acknowledgedSends: result.acknowledgedSends,
      duplicates: result.duplicates,
      lost: result.lost,
      unkeyedOk,
      unkeyedUnknown,
      unkeyedStoredDistinctTexts: unkeyedReceived.size,
      storedByTally,
    };
    console.log(`FIGURES redis-reset ${JSON.stringify(figures)}`);
    expect(result.violations).toEqual([]);
    expect(result.duplicates).toBe(0);
    expect(resets).toBeGreaterThan(5);
    expect(figures.unknownSends).toBeGreaterThan(0);
    // Keyed rooms: everything arrived, once.
    expect(result.acknowledgedSends).toBeGreaterThanOrEqual(3 * 2 * RESET_MESSAGES);
    // Unkeyed: each attempt is stored at most once: ok <= stored <= ok + unknown.
    expect(unkeyedReceived.size).toBeGreaterThanOrEqual(unkeyedOk);
    expect(unkeyedReceived.size).toBeLessThanOrEqual(unkeyedOk + unkeyedUnknown);
    // The tally agrees with what was stored: no script ran twice for one request.
    expect(storedByTally).toBe(3 * 2 * RESET_MESSAGES + unkeyedReceived.size);
  }, 300_000);

  it("subscriber connection black-holed: a recv that needs a new subscription still answers within its wait + 2 s", async () => {
    const { client } = own.target;
    const admin = new Redis(own.redis.url);
    try {
      const first = await client.pairedRoom();
      const second = await client.pairedRoom();
      // A waiting recv on node 0 makes its subscriber connection visible (ssub=1).
      const waiting = client.recv(first.code, first.b, 5000, { node: 0 });
      const subscriberPort = await subscriberPortOf(admin);
      expect(subscriberPort).toBeDefined();
      expect(own.proxy.blackholeConnection(subscriberPort!)).toBe(true);
      const started = Date.now();
      const reply = await client
        .recv(second.code, second.b, 1000, { node: 0, signal: AbortSignal.timeout(15_000) })
        .catch((e) => ({ status: 0, body: { error: String(e) } }));
      const tookMs = Date.now() - started;
      console.log(`FIGURES subscriber-blackhole ${JSON.stringify({ status: reply.status, tookMs })}`);
      own.proxy.resume();
      await waiting;
      expect([200, 503]).toContain(reply.status);
      expect(tookMs).toBeLessThan(1000 + 2000);
    } finally {
      own.proxy.resume();
      admin.disconnect();
    }
  }, 120_000);

  it("subscriber connection silently dead while a recv waits: the heartbeat replaces it and the message arrives, with no per-waiter re-read", async () => {
    // Re-reads by the waiter itself are pushed out of the way (an hour): only the
    // subscriber connection's heartbeat (one PING a second) can notice the dead connection.
    const relay = await startTarget("process", {
      REDIS_URL: own.proxy.url,
      REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
      WAKE_RECHECK_SECONDS: "3600",
      RATE_LIMIT_REQUESTS: "0",
      RATE_LIMIT_ROOMS: "0",
    });
    const admin = new Redis(own.redis.url);
    try {
      const room = await relay.client.pairedRoom();
      const waiting = relay.client.recv(room.code, room.b, 20_000).then((reply) => ({ reply, at: Date.now() }));
      const subscriberPort = await subscriberPortOf(admin);
      expect(subscriberPort).toBeDefined();
      // Nothing comes back on the subscriber connection from now on, and nothing says so.
      expect(own.proxy.blackholeConnection(subscriberPort!)).toBe(true);
      const sent = await relay.client.send(room.code, room.a, "through the heartbeat");
      expect(sent.status).toBe(200);
      const sentAt = Date.now();
      const { reply, at } = await waiting;
      const delayMs = at - sentAt;
      console.log(
        `FIGURES subscriber-heartbeat ${JSON.stringify({ status: reply.status, delayMs, heartbeatMs: 1000 })}`,
      );
      expect(reply.body.messages).toEqual([{ id: sent.body.id, from: "a", text: "through the heartbeat" }]);
      // Found by a heartbeat (every 1 s, answered within 1 s), long before the recv's 20 s wait.
      expect(delayMs).toBeLessThan(1000 + COMMAND_TIMEOUT_MS + 3000);
    } finally {
      own.proxy.resume();
      admin.disconnect();
      await relay.close();
    }
  }, 120_000);

  it("the relay process survives 200 connection resets in 6 s with 20 recvs waiting, and then delivers to all of them", async () => {
    // Found by this suite: ioredis's autoResubscribe left a rejected SSUBSCRIBE unhandled
    // when the connection dropped again before confirming it, and Node ended the process;
    // so did the rate-limit store's script load.
    // Rate limits on, as in production: their script loads ride the same flapping connection.
    const relay = await startTarget("process", {
      REDIS_URL: own.proxy.url,
      REDIS_COMMAND_TIMEOUT_MS: "1000",
      WAKE_RECHECK_SECONDS: "2",
      RATE_LIMIT_REQUESTS: "1000000",
      RATE_LIMIT_ROOMS: "1000000",
    });
    try {
      const rooms = await Promise.all(Array.from({ length: 20 }, () => relay.client.pairedRoom()));
      const waiting = rooms.map((room) =>
        relay.client.recv(room.code, room.b, 20_000).catch(() => ({ status: 0, body: {} as any })),
      );
      let exit: string | undefined;
      relay.process!.once("exit", (code, signal) => (exit = `${code ?? signal}`));
      for (let i = 0; i < 200 && exit === undefined; i++) {
        await sleep(5 + Math.random() * 50);
        own.proxy.resetAll();
      }
      await sleep(1000);
      expect(exit).toBeUndefined();
      // Still serving: every room gets its message, through the waiting recv or a new one.
      const replies = await Promise.all(waiting);
      let delivered = 0;
      for (const [i, room] of rooms.entries()) {
        let sent: { status: number } = { status: 0 };
        for (let attempt = 0; attempt < 20 && sent.status !== 200; attempt++, await sleep(100))
          sent = await relay.client.send(room.code, room.a, `after ${i}`, `after-${i}`);
        expect(sent.status).toBe(200);
        const first = replies[i]!;
        const got =
          first.status === 200 && first.body.messages?.length
            ? first
            : await relay.client.recv(room.code, room.b, 5000);
        if (got.body.messages?.[0]?.text === `after ${i}`) delivered++;
      }
      console.log(
        `FIGURES reset-storm ${JSON.stringify({ resets: 200, processExit: exit ?? "none", delivered, rooms: rooms.length })}`,
      );
      expect(delivered).toBe(rooms.length);
    } finally {
      await relay.close();
    }
  }, 120_000);

  it("latency on the Redis link: 300 ms costs time, not messages; 1,500 ms (over the command timeout) answers 503 fast, then recovers", async () => {
    const { client } = own.target;
    const history = new History();
    const deadline = Date.now() + 60_000;
    const rooms = await openRooms(client, 3, deadline);
    own.proxy.setLatency(300);
    await runRoomsWorkload(rooms, { client, history, messagesPerSeat: 8, recvWaitMs: 1000, deadline });
    const slow = checkHistory(history);
    const slowCalls = history.operations.length;
    const slow503 = history.operations.filter((o) => o.status === 503).length;
    const slowSends = history.operations
      .filter((o) => o.kind === "send" && o.outcome === "ok")
      .map((o) => o.endedAt - o.startedAt);

    own.proxy.setLatency(1500);
    // Each probe's time, less the event loop's stalls meanwhile (StallClock in history.ts).
    const probes: { status: number; ms: number }[] = [];
    for (let i = 0; i < 6; i++) {
      const started = history.now();
      const reply = await client.send(rooms[0]!.code, rooms[0]!.a, `slow ${i}`, `slow-${i}`);
      const ended = history.now();
      probes.push({ status: reply.status, ms: ended - started - history.stalls.within(started, ended) });
    }
    own.proxy.setLatency(0);
    await sleep(1600); // replies held in the link drain
    let recoveredSend = 0;
    for (let i = 0; i < 20 && recoveredSend !== 200; i++, await sleep(100))
      recoveredSend = (await client.send(rooms[1]!.code, rooms[1]!.a, "after", "after")).status;

    const figures = {
      latency300: {
        calls: slowCalls,
        answered503: slow503,
        share503: Number((slow503 / slowCalls).toFixed(3)),
        acknowledgedSends: slow.acknowledgedSends,
        unverified: slow.unverified,
        lost: slow.lost,
        duplicates: slow.duplicates,
        hung: slow.hung,
        medianSendMs: median(slowSends),
      },
      latency1500: { statuses: probes.map((p) => p.status), maxMs: Math.max(...probes.map((p) => p.ms)) },
      recoveredSend,
    };
    console.log(`FIGURES redis-latency ${JSON.stringify(figures)}`);
    // Loss and unavailability apart: a violation names which (history.ts).
    expect(slow.violations).toEqual([]);
    expect(slow.acknowledgedSends).toBe(3 * 2 * 8);
    // The bound is the feature: a store call answers 503 within twice the timeout at most
    // (docs/reliability.md), plus the HTTP round trip.
    expect(probes.filter((p) => p.status !== 503 || p.ms >= 2 * COMMAND_TIMEOUT_MS + 500)).toEqual([]);
    expect(recoveredSend).toBe(200);
  }, 120_000);
});
