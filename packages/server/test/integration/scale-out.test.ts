// Many stateless nodes on one Redis or one Redis Cluster: wake-ups cross nodes, lost
// wake-ups cannot strand a recv, and a node's Redis connections do not grow with its load.
import { setMaxListeners } from "node:events";
import { Redis } from "ioredis";
import { spawnCluster, type SpawnedCluster } from "@duet/testkit";
import { startTarget, type RelayTarget, type TargetKind, useTarget } from "../support/targets";
import { asClient, holdRecv, openRooms } from "../support/workload";
import { ownRedis } from "../support/own-redis";

const MULTI_NODE: TargetKind[] = ["redis-3-nodes", "cluster-3-nodes"];

/** Admin connections to every Redis process behind a target. */
function adminClients(kind: TargetKind): Redis[] {
  if (kind.startsWith("cluster")) {
    return process.env.REDIS_CLUSTER_NODES!.split(",").map((seed) => {
      const [host, port] = seed.split(":");
      return new Redis(Number(port), host!);
    });
  }
  return [new Redis(process.env.REDIS_URL!)];
}

describe.each(MULTI_NODE)("on %s", (kind) => {
  describe("wake-up races", () => {
    // A lost wake-up would show as a recv that waits for its whole wait: no safety re-check.
    const target = useTarget(kind, { WAKE_RECHECK_SECONDS: "3600" });

    it("500 send/recv pairs on different nodes, recv started just before the send: no recv waits out its wait", async () => {
      const { client } = target();
      // 50 rooms, 10 pairs each, every pair a fresh race between a subscription and a publish.
      const rooms = await Promise.all(Array.from({ length: 50 }, () => client.pairedRoom()));
      // A lost wake-up shows as a recv whose answering call lasted its whole wait, the longest
      // there is (there is no safety re-check). How fast a woken recv answers is the machine's
      // business, not this test's: only a call that lasted the whole 25 s wait (the event a
      // lost wake-up produces, and nothing else does) counts. A recv may also answer 503 (its subscription not
      // confirmed within 2 s) and be retried as a client would: that call is not the one timed,
      // and the retries are counted.
      const WAIT_MS = 25_000;
      const slow: number[] = [];
      let delivered = 0;
      let retried = 0;
      const timedRecv = async (code: string, token: string, node: number) => {
        for (;;) {
          const started = Date.now();
          const reply = await client.recv(code, token, WAIT_MS, { node });
          if (reply.status !== 503) return { reply, took: Date.now() - started };
          retried++;
          await new Promise((r) => setTimeout(r, Number(reply.headers.get("retry-after") ?? 1) * 1000));
        }
      };
      await Promise.all(
        rooms.map(async (room, r) => {
          for (let i = 0; i < 10; i++) {
            // Node (r + i) % 3 holds the recv, the next node takes the send.
            const waiting = timedRecv(room.code, room.b, r + i);
            const sent = await asClient(() =>
              client.send(room.code, room.a, `pair ${r}/${i}`, `pair-${r}-${i}`, { node: r + i + 1 }),
            );
            const { reply, took } = await waiting;
            if (took >= WAIT_MS) slow.push(took);
            expect(reply.body.messages).toEqual([{ id: sent.body.id, from: "a", text: `pair ${r}/${i}` }]);
            delivered++;
            await asClient(() => client.ack(room.code, room.b, [sent.body.id], { node: r + i + 2 }));
          }
        }),
      );
      expect(delivered).toBe(500);
      expect(slow).toEqual([]);
      console.log(
        `${kind}: 500 cross-node send/recv pairs, ${delivered} delivered, ${slow.length} waited out, ${retried} recvs retried after a 503`,
      );
    }, 300_000);
  });

  describe("subscriber loss", () => {
    // No periodic re-read (an hour): the reconnect's re-read alone delivers.
    const target = useTarget(kind, { WAKE_RECHECK_SECONDS: "3600" });

    it("CLIENT KILL TYPE pubsub while recvs wait: every message is still delivered within 3.5 s, with no periodic re-read", async () => {
      const { client } = target();
      const rooms = await Promise.all(Array.from({ length: 30 }, () => client.pairedRoom()));
      const waiting = rooms.map((room, i) => {
        const started = Date.now();
        return client
          .recv(room.code, room.b, 20_000, { node: i })
          .then((reply) => ({ reply, started, finished: Date.now() }));
      });
      await new Promise((r) => setTimeout(r, 300));
      const admins = adminClients(kind);
      let killed = 0;
      for (const admin of admins) killed += Number(await admin.call("CLIENT", "KILL", "TYPE", "pubsub"));
      for (const admin of admins) admin.disconnect();
      expect(killed).toBeGreaterThanOrEqual(3); // every node lost its subscriber(s)
      const sentAt = Date.now();
      const sent = await Promise.all(
        rooms.map((room, i) => client.send(room.code, room.a, `after kill ${i}`, undefined, { node: i + 1 })),
      );
      const results = await Promise.all(waiting);
      for (const [i, { reply }] of results.entries())
        expect(reply.body.messages).toEqual([{ id: sent[i]!.body.id, from: "a", text: `after kill ${i}` }]);
      const worstDelay = Math.max(...results.map(({ finished }) => finished - sentAt));
      console.log(`${kind}: subscriber killed, 30/30 delivered, worst delay ${worstDelay} ms (no periodic re-read)`);
      expect(worstDelay).toBeLessThan(2000 + 1500);
    }, 120_000);
  });

  describe("closing across nodes", () => {
    const target = useTarget(kind, { WAKE_RECHECK_SECONDS: "3600" });

    it("a close on one node ends the recvs waiting on every node with 404", async () => {
      const { client } = target();
      const room = await client.pairedRoom();
      const waiting = [0, 1, 2].map((node) => client.recv(room.code, node % 2 ? room.a : room.b, 15_000, { node }));
      await new Promise((r) => setTimeout(r, 300));
      const started = Date.now();
      expect((await client.close(room.code, room.a, false, { node: 1 })).status).toBe(200);
      for (const reply of await Promise.all(waiting)) expect(reply.status).toBe(404);
      expect(Date.now() - started).toBeLessThan(3000);
    });

    it("status, peer_active and stats are the same whichever node answers", async () => {
      const { client } = target();
      const room = await client.pairedRoom();
      await client.send(room.code, room.a, "x", undefined, { node: 0 });
      const statuses = await Promise.all([0, 1, 2].map((node) => client.status(room.code, room.b, { node })));
      for (const status of statuses)
        expect({ ...status.body, expires_in: 0 }).toEqual({ ...statuses[0]!.body, expires_in: 0 });
      expect(statuses[0]!.body).toMatchObject({ peer_active: true, pending_in: 1 });
      const stats = await Promise.all([0, 1, 2].map((node) => client.stats({ node })));
      for (const reply of stats) expect(reply.body).toEqual(stats[0]!.body);
    });
  });
});

/**
 * Until all 1,000 rooms' channels are subscribed (`subscribed` counts them): every recv is
 * waiting, and none failed. The deadline only guards a hang.
 */
async function untilSubscribed(subscribed: () => Promise<number>, failed: string[]) {
  for (
    const deadline = Date.now() + 150_000;
    (await subscribed()) < 1000 && Date.now() < deadline && failed.length === 0;
  )
    await new Promise((r) => setTimeout(r, 100));
  expect(failed).toEqual([]);
  expect(await subscribed()).toBe(1000);
}

describe("Redis connections per node", () => {
  const own = ownRedis({ args: ["--maxclients", "10000"] });

  const relayConnections = async () =>
    ((await own.admin.call("CLIENT", "LIST")) as string)
      .split("\n")
      .filter((line) => line && !line.includes("cmd=client|list")).length;

  it("stays constant from 0 to 1,000 waiting recvs: one command connection and one subscriber", async () => {
    const { client } = own.target;
    // Both connections are up once the relay is ready and the subscriber has said hello.
    let idle = await relayConnections();
    for (const deadline = Date.now() + 10_000; idle < 2 && Date.now() < deadline; idle = await relayConnections())
      await new Promise((r) => setTimeout(r, 100));
    const rooms = await openRooms(client, 1000, Date.now() + 60_000);
    const abort = new AbortController();
    // 1,000 waiting calls (and their retries) share one abort signal.
    setMaxListeners(5000, abort.signal);
    const failed: string[] = [];
    const waiting = rooms.map((room) => holdRecv(client, room.code, room.b, abort.signal, failed));
    const subscribed = async () => ((await own.admin.call("PUBSUB", "SHARDCHANNELS")) as string[]).length;
    await untilSubscribed(subscribed, failed);
    const loaded = await relayConnections();
    console.log(`Redis connections of one node: ${idle} with 0 waiting recvs, ${loaded} with 1,000`);
    expect(idle).toBe(2);
    expect(loaded).toBe(2);
    abort.abort();
    await Promise.all(waiting);
  }, 300_000);
});

describe("Redis connections per node on a cluster", () => {
  let cluster: SpawnedCluster;
  let target: RelayTarget;
  let admins: Redis[];
  beforeAll(async () => {
    cluster = await spawnCluster(3);
    admins = cluster.nodes.map((node) => new Redis(node.port, "127.0.0.1"));
    target = await startTarget("cluster", { REDIS_CLUSTER_NODES: cluster.seeds });
  });
  afterAll(async () => {
    await target?.close();
    for (const admin of admins ?? []) admin.disconnect();
    await cluster?.stop();
  });

  // Every client connection on every master, less the admin connections of this test and
  // ioredis's slot-map refreshers: each Cluster client asks CLUSTER SLOTS every second
  // (slotsRefreshInterval) on a connection of its own that it closes at the answer. One
  // still open when the count is read is not a connection the node holds.
  const relayConnections = async () => {
    let total = 0;
    for (const admin of admins)
      total +=
        ((await admin.call("CLIENT", "LIST")) as string)
          .split("\n")
          .filter((line) => line && !line.includes(" name=ioredis-cluster(refresher)")).length - 1;
    return total;
  };

  /**
   * The count once every connection is made: a command connection, the subscribing
   * client's own and a sharded subscriber per master (the deadline only guards a hang). The
   * subscribing client connects on its own schedule (a first slot-map read that fails at a
   * Cluster's start is retried after a backoff), so the count is waited for, not sampled.
   */
  const IDLE = 3 * 3;
  const connectionsOnceUp = async () => {
    let now = await relayConnections();
    for (const deadline = Date.now() + 60_000; now !== IDLE && Date.now() < deadline; now = await relayConnections())
      await new Promise((r) => setTimeout(r, 100));
    return now;
  };

  it("stays constant from 0 to 1,000 waiting recvs: per master: a command connection, the subscribing client's own, and a sharded subscriber", async () => {
    const { client } = target;
    const idle = await connectionsOnceUp();
    expect(idle).toBe(IDLE);
    const rooms = await openRooms(client, 1000, Date.now() + 60_000);
    const abort = new AbortController();
    // 1,000 waiting calls (and their retries) share one abort signal.
    setMaxListeners(5000, abort.signal);
    const failed: string[] = [];
    const waiting = rooms.map((room) => holdRecv(client, room.code, room.b, abort.signal, failed));
    const subscribed = async () => {
      let total = 0;
      for (const admin of admins) total += ((await admin.call("PUBSUB", "SHARDCHANNELS")) as string[]).length;
      return total;
    };
    await untilSubscribed(subscribed, failed);
    const loaded = await relayConnections();
    console.log(
      `Redis connections of one node on a 3-master cluster: ${idle} with 0 waiting recvs, ${loaded} with 1,000`,
    );
    expect(loaded).toBe(IDLE);
    abort.abort();
    await Promise.all(waiting);
  }, 300_000);
});
