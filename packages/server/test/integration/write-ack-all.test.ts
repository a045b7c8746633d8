// REDIS_WRITE_ACK_REPLICAS=all against real replicas (docs/high-availability.md):
//  - on Sentinel, a change succeeds again as soon as the new master has a replica, while
//    the failed master is still down (with a fixed count of 2 it would answer 503 until
//    the old master is back as a replica);
//  - on a master that is still reachable after one of its replicas was promoted away from
//    it (SENTINEL FAILOVER, a master that wakes up), a change its other replica confirms
//    still answers 503 during the grace, and after it for as long as the promoted replica
//    answers as a master: that replica is about to resync from the new master and drop it
//    (a Sentinel slow to move it, e.g. in TILT, let the grace run out: the change was
//    acknowledged, and lost when the failover finished);
//  - while WAITs fall short (a replica stopped), changes beyond what can answer in time are
//    refused before they are sent, instead of queuing on the connection behind WAITs that
//    each hold it for the whole timeout.
//  - a relay whose master keeps no append-only file says so at start-up;
//  - a send retried through another relay (another connection) finds its first attempt
//    stored and answers it as a replay: acknowledged only once the replicas have that first
//    attempt (the replay refreshes the room's expiry, a write, so its WAIT covers it), not
//    because the other connection's own earlier writes were confirmed.
import { Writable } from "node:stream";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { startRelay } from "../../src/relay";
import { hashSeatToken } from "../../src/store/credentials";
import { spawnRedis, type SpawnedRedis, ask } from "@duet/testkit";
import { RedisWakeupBus } from "../../src/realtime/redis-wakeups";
import { createRedisConnections, replicaProbe } from "../../src/store/redis/connection";
import { RedisKeys } from "../../src/store/redis/keys";
import { RedisRoomStore } from "../../src/store/redis/redis-store";
import { ownSentinel } from "../support/own-redis";
import { sleep, untilOk } from "../support/waiting";
import { uniquePrefix } from "../support/targets";

/** Replicas the master on `port` lists online. */
const onlineReplicas = async (port: number) =>
  ((await ask(port, (c) => c.info("replication"))) ?? "")
    .split("\n")
    .filter((line) => /^slave\d+:.*state=online/.test(line)).length;

describe("write-ack all on Sentinel: changes resume once the new master has a replica", () => {
  const own = ownSentinel({ downAfterMs: 1000, failoverTimeoutMs: 5000 }, "redis", {
    REDIS_WRITE_ACK_REPLICAS: "all",
    REDIS_WRITE_ACK_TIMEOUT_MS: "500",
  });

  it("the master killed and left down: the next send succeeds on the new master with one replica, and nothing acknowledged is lost", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    const before = await untilOk(() => client.send(room.code, room.a, "before", "k1"));
    expect(before.status).toBe(200);
    const master = await own.topology.master();
    master.process.kill("SIGKILL");
    const promoted = await own.topology.waitForNewMaster(master.port);
    // The old master stays down: the new one has one replica of the two it had.
    const after = await untilOk(() => client.send(room.code, room.a, "after", "k2"));
    expect(after.status).toBe(200);
    expect(await onlineReplicas(promoted)).toBe(1);
    const inbox = await untilOk(() => client.recv(room.code, room.b, 0));
    expect(inbox.body.messages.map((m: { text: string }) => m.text)).toEqual(["before", "after"]);
    // Back as a replica, the old master is waited for again.
    await own.topology.restart(master.port);
    await own.topology.waitForReplicas(2, 30_000);
    const ack = await untilOk(() => client.ack(room.code, room.b, [before.body.id, after.body.id]));
    expect(ack.status).toBe(200);
  }, 400_000);
});

/** A master (pinging its replicas every second) and two replicas, without Sentinel. */
const masterWithReplicas = async () => {
  const master = await spawnRedis(["--repl-ping-replica-period", "1"]);
  const replicaOf = ["--replicaof", "127.0.0.1", String(master.port)];
  return [master, await spawnRedis(replicaOf), await spawnRedis(replicaOf)] as const;
};

/** A store on `node` with write-ack all and the relay's replica probe: a relay connected there. */
async function writeAckAllStore(node: SpawnedRedis, prefix: string, graceMs: number): Promise<RedisRoomStore> {
  const keys = new RedisKeys(prefix);
  const settings = { url: node.url, tls: false, commandTimeoutMs: 1500, writeAckReplicas: "all" as const };
  const connections = createRedisConnections(settings);
  const store = new RedisRoomStore({
    client: connections.commands,
    subscriber: connections.subscriber,
    wakeups: new RedisWakeupBus(connections.subscriber, (code) => keys.wakeChannel(code), undefined, 1500),
    keyPrefix: prefix,
    lifetimes: { idleMs: 600_000, maxMs: 600_000 },
    operationTimeoutMs: 1500,
    writeAck: { client: connections.acked!, replicas: "all", timeoutMs: 500, graceMs, probe: replicaProbe(settings) },
    onClose: connections.stop,
  });
  for (const deadline = Date.now() + 10_000; connections.acked!.status !== "ready" || !(await store.isReady()); )
    if (Date.now() > deadline) throw new Error("the store never connected");
    else await sleep(50);
  return store;
}

describe("write-ack all on one master with two replicas (no Sentinel)", () => {
  let master: SpawnedRedis;
  let replicas: SpawnedRedis[];
  let store: RedisRoomStore;
  let prefix: string;
  const GRACE_MS = 2000;
  beforeAll(async () => {
    [master, ...replicas] = await masterWithReplicas();
    for (const deadline = Date.now() + 20_000; (await onlineReplicas(master.port)) < 2; await sleep(100))
      if (Date.now() > deadline) throw new Error("replicas never came online");
    prefix = uniquePrefix();
    store = await storeOn(prefix);
  }, 120_000);
  /** A store with connections of its own on the master: another relay's. */
  const storeOn = (prefix: string) => writeAckAllStore(master, prefix, GRACE_MS);
  afterAll(async () => {
    await store?.close();
    await Promise.all([master, ...(replicas ?? [])].filter(Boolean).map((node) => node.stop("SIGKILL")));
  });

  const send = async (code: string, token: string, text: string, via = store, idempotencyKey?: string) => {
    try {
      return await via.sendMessage({
        code,
        tokenHash: hashSeatToken(token),
        text,
        envelope: false,
        ...(idempotencyKey ? { idempotencyKey, textDigest: `digest of ${text}` } : {}),
      });
    } catch (error) {
      return error as Error & { status?: number };
    }
  };
  /** A send that must succeed: retried through 503s (a loaded machine delays a replica's confirmation). */
  const sendOk = async (code: string, token: string, text: string, via = store) => {
    for (let attempt = 0; ; attempt++) {
      const result = await send(code, token, text, via);
      if (!(result instanceof Error)) return result;
      if (attempt >= 20) throw result;
      await sleep(250);
    }
  };

  it("a replica promoted away from a master that still takes writes: the other replica's confirmation is not enough, during the grace or after it while the promoted one answers as a master", async () => {
    const room = await store.openRoom();
    await store.joinRoom(room.code);
    await sendOk(room.code, room.token, "both replicas");
    // What a promotion does to the replica: it stops replicating and takes writes itself.
    const [promoted, other] = replicas as [SpawnedRedis, SpawnedRedis];
    expect(await ask(promoted.port, (c) => c.replicaof("NO", "ONE"))).toBe("OK");
    try {
      for (const deadline = Date.now() + 10_000; (await onlineReplicas(master.port)) !== 1; await sleep(50))
        if (Date.now() > deadline) throw new Error("the master never saw its replica leave");
      // The remaining replica confirms every change, but it would resync from the new master
      // and lose it: refused during the grace...
      const refused = await send(room.code, room.token, "only the other replica");
      expect(refused).toMatchObject({ code: "unavailable", status: 503 });
      // ...and after it, since the promoted replica answers as a master: this one has been
      // failed over, whatever Sentinel has yet to do (the next test finishes such a failover).
      await sleep(GRACE_MS);
      expect(await send(room.code, room.token, "after the grace")).toMatchObject({ code: "unavailable", status: 503 });
      expect(await onlineReplicas(master.port)).toBe(1);
      expect(await ask(other.port, async (c) => (await c.info("replication")).includes("master_link_status:up"))).toBe(
        true,
      );
    } finally {
      await ask(promoted.port, (c) => c.replicaof("127.0.0.1", String(master.port)));
    }
    for (const deadline = Date.now() + 20_000; (await onlineReplicas(master.port)) < 2; await sleep(100))
      if (Date.now() > deadline) throw new Error("the replica never came back");
    // Back: both are waited for again at once.
    await sendOk(room.code, room.token, "both again");
  }, 120_000);

  it("a replica that left and does not answer (down): after the grace, changes go on with the other", async () => {
    const room = await store.openRoom();
    await store.joinRoom(room.code);
    await sendOk(room.code, room.token, "both replicas");
    const gone = replicas[1]!;
    gone.process.kill("SIGSTOP");
    try {
      expect(await send(room.code, room.token, "finds it silent")).toMatchObject({ code: "unavailable" });
      // Quiet past ATTACHED_LAG_SECONDS, then its grace: a replica that does not answer is down.
      const without = await untilOk(async () => {
        const result = await send(room.code, room.token, "without it", store, "k-without");
        return result instanceof Error ? { status: 503 } : { status: 200 };
      }, 60_000);
      expect(without.status).toBe(200);
    } finally {
      gone.process.kill("SIGCONT");
    }
    for (const deadline = Date.now() + 20_000; (await onlineReplicas(master.port)) < 2; await sleep(100))
      if (Date.now() > deadline) throw new Error("the replica never came back");
  }, 120_000);

  it("a stopped replica: a burst of changes is refused unsent, not queued behind WAITs that each take their whole timeout", async () => {
    // Replicas an earlier case stopped may still be catching up: set up once they confirm again.
    const confirmed = async <T>(change: () => Promise<T>): Promise<T> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await change();
        } catch (error) {
          if ((error as { code?: string }).code !== "unavailable" || attempt >= 80) throw error;
          await sleep(250);
        }
      }
    };
    const room = await confirmed(() => store.openRoom());
    const peer = await confirmed(() => store.joinRoom(room.code));
    await sendOk(room.code, room.token, "both replicas");
    const stopped = replicas[0]!;
    stopped.process.kill("SIGSTOP");
    try {
      // The first change finds the replica silent: its WAIT falls short (503).
      expect(await send(room.code, room.token, "finds it silent")).toMatchObject({ code: "unavailable" });
      const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => send(room.code, room.token, `burst ${i}`)));
      expect(burst.every((r) => r instanceof Error && (r as { code?: string }).code === "unavailable")).toBe(true);
    } finally {
      stopped.process.kill("SIGCONT");
    }
    await sleep(1000);
    // 1500 ms of operation timeout / 500 ms of WAIT timeout: three may have waited (and been
    // stored), the rest were never sent. Queued instead, every one of them would have run,
    // one per 500 ms, long after its caller had its 503.
    // (The mailbox holds 8: the first two sends and up to 6 of the burst.)
    let inbox;
    for (let attempt = 0; !inbox; attempt++) {
      inbox = await store.readInbox({ code: room.code, tokenHash: hashSeatToken(peer.token) }, false).catch((e) => {
        if (attempt >= 20) throw e;
        return sleep(250).then(() => undefined);
      });
    }
    const stored = inbox.messages.filter((m) => m.text.startsWith("burst ")).length;
    expect(stored).toBeLessThanOrEqual(3);
  }, 120_000);

  it("a send retried through another relay while a replica is stopped: its replay is not acknowledged until the replicas have the first attempt", async () => {
    const other = await storeOn(prefix);
    try {
      const room = await store.openRoom();
      await store.joinRoom(room.code);
      await sendOk(room.code, room.token, "both replicas");
      // The other relay's connection has written and been confirmed: a WAIT of its own would
      // have nothing left to wait for unless the replay moves the replication stream on.
      await sendOk(room.code, room.token, "through the other relay first", other);
      const stopped = replicas[0]!;
      stopped.process.kill("SIGSTOP");
      try {
        // The first attempt is stored on the master and one replica: not acknowledged.
        expect(await send(room.code, room.token, "once", store, "k-replay")).toMatchObject({ code: "unavailable" });
        // Its retry through the other relay finds it stored; the stopped replica does not
        // have it, and a failover to that replica would lose it: no acknowledgement yet.
        expect(await send(room.code, room.token, "once", other, "k-replay")).toMatchObject({ code: "unavailable" });
      } finally {
        stopped.process.kill("SIGCONT");
      }
      const replay = await untilOk(async () => {
        const result = await send(room.code, room.token, "once", other, "k-replay");
        return result instanceof Error ? { status: 503 } : { status: 200, ...result };
      });
      expect(replay).toMatchObject({ status: 200, replayed: true });
    } finally {
      await other.close();
    }
  }, 120_000);
});

describe("write-ack all: a failover that Sentinel finishes late (no Sentinel: done by hand)", () => {
  it("the old master and its other replica acknowledge nothing while the promoted replica is a master, so finishing the failover loses nothing", async () => {
    const GRACE_MS = 2000;
    const [master, promoted, other] = await masterWithReplicas();
    const stores: RedisRoomStore[] = [];
    /** A store on `node`: a relay connected there. */
    const storeAt = async (node: SpawnedRedis, prefix: string) => {
      const store = await writeAckAllStore(node, prefix, GRACE_MS);
      stores.push(store);
      return store;
    };
    const linkUp = async (node: SpawnedRedis) =>
      (await ask(node.port, (c) => c.info("replication")))?.includes("master_link_status:up") ?? false;
    try {
      for (const deadline = Date.now() + 20_000; (await onlineReplicas(master.port)) < 2; await sleep(100))
        if (Date.now() > deadline) throw new Error("replicas never came online");
      const prefix = uniquePrefix();
      const store = await storeAt(master, prefix);
      const room = await store.openRoom();
      const peer = await store.joinRoom(room.code);
      const acknowledged: string[] = [];
      const send = async (text: string) => {
        try {
          await store.sendMessage({ code: room.code, tokenHash: hashSeatToken(room.token), text, envelope: false });
          acknowledged.push(text);
          return 200;
        } catch (error) {
          return (error as { status?: number }).status;
        }
      };
      expect((await untilOk(async () => ({ status: (await send("before")) ?? 0 }))).status).toBe(200);
      // Sentinel promotes a replica, and then (slow: a sentinel in TILT does nothing for 30 s)
      // does not yet move the other one to it: the old master keeps that one.
      expect(await ask(promoted.port, (c) => c.replicaof("NO", "ONE"))).toBe("OK");
      for (const deadline = Date.now() + 10_000; (await onlineReplicas(master.port)) !== 1; await sleep(50))
        if (Date.now() > deadline) throw new Error("the master never saw its replica leave");
      // Refused during the grace (which starts when a change sees the replica gone)...
      expect(await send("during the grace")).toBe(503);
      await sleep(GRACE_MS + 500);
      // ...and past it: the old master and the replica it kept would acknowledge this.
      const afterGrace = await send("after the grace");
      // Sentinel finishes: the other replica and the old master follow the new master.
      expect(await ask(other.port, (c) => c.replicaof("127.0.0.1", String(promoted.port)))).toBe("OK");
      expect(await ask(master.port, (c) => c.replicaof("127.0.0.1", String(promoted.port)))).toBe("OK");
      for (const deadline = Date.now() + 20_000; !((await linkUp(other)) && (await linkUp(master))); await sleep(100))
        if (Date.now() > deadline) throw new Error("the failover never finished");
      // Every acknowledged change is on the new master.
      const onNew = await storeAt(promoted, prefix);
      let inbox;
      for (let attempt = 0; !inbox; attempt++) {
        inbox = await onNew.readInbox({ code: room.code, tokenHash: hashSeatToken(peer.token) }, false).catch((e) => {
          if (attempt >= 40) throw e;
          return sleep(250).then(() => undefined);
        });
      }
      expect({ onTheNewMaster: inbox.messages.map((m) => m.text) }).toEqual({ onTheNewMaster: acknowledged });
      expect(afterGrace).toBe(503);
    } finally {
      await Promise.all(stores.map((store) => store.close()));
      await Promise.all([master, promoted, other].map((node) => node.stop("SIGKILL")));
    }
  }, 120_000);
});

describe("write-ack on a master that keeps no append-only file", () => {
  it("the relay says at start-up that a master restarted before a failover would lose what it acknowledged", async () => {
    const master = await spawnRedis(); // the fixture's default: appendonly no
    const lines: string[] = [];
    const sink = new Writable({
      write: (chunk, _enc, done) => {
        lines.push(chunk.toString());
        done();
      },
    });
    const relay = await startRelay(
      loadConfig({
        HOST: "127.0.0.1",
        PORT: "0",
        METRICS_PORT: "off",
        REDIS_URL: master.url,
        REDIS_KEY_PREFIX: uniquePrefix(),
        REDIS_WRITE_ACK_REPLICAS: "all",
      }),
      createLogger("warn", sink),
    );
    try {
      for (const deadline = Date.now() + 20_000; !lines.some((l) => l.includes("appendonly")); await sleep(50))
        if (Date.now() > deadline) throw new Error(`no warning; logged: ${lines.join("")}`);
      expect(lines.find((l) => l.includes("appendonly"))).toContain("keeps no append-only file");
    } finally {
      await relay.shutdown();
      await master.stop("SIGKILL");
    }
  }, 60_000);
});
