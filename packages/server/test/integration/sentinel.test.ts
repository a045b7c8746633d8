import { once } from "node:events";
import { Redis } from "ioredis";
import { loadConfig } from "../../src/config";
import { closeConnection, createRedisConnections } from "../../src/store/redis/connection";
import { ownSentinel } from "../support/own-redis";
import { sleep, untilOk } from "../support/waiting";

describe("relay on Sentinel", () => {
  const own = ownSentinel({}, "redis");

  it("finds the master through Sentinel, follows SENTINEL FAILOVER and keeps what was acknowledged", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    const sent = await client.send(room.code, room.a, "before the failover", "k1");
    expect(sent.status).toBe(200);
    const before = await own.topology.masterPort();
    await own.topology.sentinelFailover();
    expect(await own.topology.masterPort()).not.toBe(before);
    // The same key after the failover: the message is there (replicated before the switch), one id.
    const again = await untilOk(() => client.send(room.code, room.a, "before the failover", "k1"));
    expect(again.body.id).toBe(sent.body.id);
    const inbox = await untilOk(() => client.recv(room.code, room.b, 0));
    expect(inbox.body.messages.map((m: { text: string }) => m.text)).toEqual(["before the failover"]);
    await own.topology.waitForReplicas(2);
  }, 120_000);

  // ioredis ends a Sentinel connection for good when it is dropped while it asks a sentinel
  // for the master (what its failover detector and the heartbeat do during a failover):
  // every call then answered 503 until the relay restarted. The connection must come back.
  it("a connection dropped while it asks Sentinel for the master connects again", async () => {
    const { redis } = loadConfig({ REDIS_SENTINELS: own.topology.sentinels, REDIS_SENTINEL_NAME: own.topology.name });
    const connections = createRedisConnections({ ...redis! });
    const { commands } = connections;
    commands.on("error", () => undefined);
    try {
      if (commands.status !== "ready") await once(commands, "ready");
      // The first drop makes it reconnect; the second lands while it asks a sentinel.
      const droppedWhileAsking = new Promise<void>((resolve) =>
        commands.once("connecting", () => {
          (commands as Redis).disconnect(true);
          resolve();
        }),
      );
      (commands as Redis).disconnect(true);
      await droppedWhileAsking;
      const statuses: string[] = [];
      for (const status of ["end", "ready"]) commands.on(status, () => statuses.push(status));
      // A guard against a hang, not a measure: the reconnect backoff is 100 ms.
      let guard: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise((resolve) => commands.once("ready", resolve)),
        new Promise((resolve) => (guard = setTimeout(resolve, 60_000))),
      ]);
      clearTimeout(guard);
      // Before the fix: statuses ["end"], and the connection stayed ended.
      expect({ now: commands.status, statuses }).toEqual({ now: "ready", statuses: expect.arrayContaining(["ready"]) });
      expect(await commands.ping()).toBe("PONG");
    } finally {
      connections.stop();
      await Promise.all([connections.commands, connections.subscriber].map(closeConnection));
    }
  }, 120_000);

  it("a recv waiting through a hung master (SIGSTOP) gets a message sent after the failover", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    const master = await own.topology.master();
    // Subscribe first: the recv is waiting on the subscriber connection to the master.
    const waiting = client.recv(room.code, room.b, 25_000);
    await sleep(300);
    master.process.kill("SIGSTOP");
    try {
      await own.topology.waitForNewMaster(master.port);
      const sent = await untilOk(() => client.send(room.code, room.a, "after the failover", "k1"));
      expect(sent.status).toBe(200);
      const reply = await waiting;
      // Either the waiting recv got it, or it answered 503 during the gap and a new one does.
      const messages =
        reply.status === 200 && reply.body.messages.length > 0
          ? reply.body.messages
          : (await untilOk(() => client.recv(room.code, room.b, 5000))).body.messages;
      expect(messages.map((m: { text: string }) => m.text)).toEqual(["after the failover"]);
    } finally {
      master.process.kill("SIGCONT");
    }
    await own.topology.waitForReplicas(2);
  }, 120_000);
});

describe("write-ack on Sentinel (REDIS_WRITE_ACK_REPLICAS=1)", () => {
  // Failover off in practice (down-after 60 s): this test stops replicas, not the master.
  const own = ownSentinel({ downAfterMs: 60_000 }, "redis-3-nodes", {
    REDIS_WRITE_ACK_REPLICAS: "1",
    REDIS_WRITE_ACK_TIMEOUT_MS: "300",
  });

  it("every state change succeeds while a replica confirms it", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    const sent = await client.send(room.code, room.a, "hello", "k1");
    expect(sent.status).toBe(200);
    const inbox = await untilOk(() => client.recv(room.code, room.b, 0));
    expect(inbox.body.messages.map((m: { id: string }) => m.id)).toEqual([sent.body.id]);
    expect((await client.ack(room.code, room.b, [sent.body.id])).status).toBe(200);
    expect((await client.close(room.code, room.a)).status).toBe(200);
    // Refusals are answered as refusals, not 503s.
    expect((await client.send(room.code, room.a, "gone", "k2")).status).toBe(404);
  });

  it("a master whose script cache was emptied (as on a promoted replica) still takes changes: NOSCRIPT falls back to EVAL", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    expect((await client.send(room.code, room.a, "first", "k1")).status).toBe(200);
    const master = await own.topology.master();
    const admin = new Redis(master.port, "127.0.0.1", { maxRetriesPerRequest: 0 });
    try {
      expect(await admin.script("FLUSH")).toBe("OK");
    } finally {
      admin.disconnect();
    }
    const sent = await client.send(room.code, room.a, "after SCRIPT FLUSH", "k2");
    expect(sent.status).toBe(200);
    const inbox = await untilOk(() => client.recv(room.code, room.b, 0));
    expect(inbox.body.messages.map((m: { text: string }) => m.text)).toEqual(["first", "after SCRIPT FLUSH"]);
  });

  it("with every replica stopped a send answers 503 with Retry-After; its retry once they are back answers the same id", async () => {
    const { client } = own.target;
    const room = await client.pairedRoom();
    const master = await own.topology.master();
    const replicas = [...own.topology.nodes.values()].filter((node) => node.port !== master.port);
    expect(replicas).toHaveLength(2);
    for (const replica of replicas) replica.process.kill("SIGSTOP");
    let refused;
    try {
      refused = await client.send(room.code, room.a, "needs a replica", "k1");
      expect(refused.status).toBe(503);
      expect(refused.body.error).toBe("unavailable");
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      // Refusals that change nothing still answer as themselves.
      expect((await client.send(room.code, room.a, "another text", "k1")).status).toBe(409);
    } finally {
      for (const replica of replicas) replica.process.kill("SIGCONT");
    }
    const retried = await untilOk(() => client.send(room.code, room.a, "needs a replica", "k1"));
    expect(retried.status).toBe(200);
    const inbox = await untilOk(() => client.recv(room.code, room.b, 0));
    expect(inbox.body.messages.map((m: { text: string }) => m.text)).toEqual(["needs a replica"]);
    expect(inbox.body.messages[0].id).toBe(retried.body.id);
  }, 120_000);
});
