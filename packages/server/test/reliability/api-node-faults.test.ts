// API nodes failing under load: a node SIGKILLed with 400 recvs waiting on it (1,000 with DUET_SOAK=1) (clients
// retry on another node), and a rolling restart of every node (SIGTERM, one at a time)
// under steady traffic. The relay processes are the built server (pnpm build first).
import { Redis } from "ioredis";
import { FailoverClient } from "../support/failover-client";
import { checkHistory, History, messageText, type Delivered } from "../support/history";
import { TestClient } from "../support/http-client";
import { startTarget, uniquePrefix, type RelayTarget } from "../support/targets";
import { median, openRooms, runRoomsWorkload } from "../support/workload";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SOAK = process.env.DUET_SOAK === "1";

describe(`an API node killed with ${SOAK ? "1,000" : "400"} recvs waiting on it`, () => {
  const targets: RelayTarget[] = [];
  let admin: Redis;
  afterAll(async () => {
    admin?.disconnect();
    await Promise.all(targets.map((t) => t.close()));
  });

  it("clients retrying on another node lose 0 messages", async () => {
    const prefix = uniquePrefix();
    const env = { REDIS_URL: process.env.REDIS_URL!, REDIS_KEY_PREFIX: prefix };
    targets.push(...(await Promise.all([startTarget("process", env), startTarget("process", env)])));
    const [doomed, survivor] = targets as [RelayTarget, RelayTarget];
    const client = new TestClient([doomed.client.baseUrls[0]!, survivor.client.baseUrls[0]!]);
    admin = new Redis(process.env.REDIS_URL!);
    const history = new History();
    // 400 waiting recvs in the short form (CI's two cores run every lane at once), 1,000 soaking.
    const ROOMS = SOAK ? 1000 : 400;
    const rooms: { code: string; a: string; b: string }[] = [];
    for (let batch = 0; batch < ROOMS / 100; batch++) {
      rooms.push(...(await Promise.all(Array.from({ length: 100 }, () => client.pairedRoom()))));
    }

    // Every b waits on the doomed node; on a connection failure it retries on the survivor.
    const received = new Map<string, Delivered[]>();
    let retriedOnSurvivor = 0;
    const receivers = rooms.map(async (room) => {
      for (let attempt = 0; attempt < 20; attempt++) {
        const node = attempt === 0 ? 0 : 1;
        const startedAt = history.now();
        const reply = await client
          .recv(room.code, room.b, 15_000, { node, signal: AbortSignal.timeout(30_000) })
          .catch(() => undefined);
        const status = reply?.status ?? 0;
        const messages =
          status === 200
            ? (reply!.body.messages as Delivered[]).map(({ id, from, text }) => ({ id, from, text }))
            : undefined;
        history.record({
          kind: "recv",
          room: room.code,
          seat: "b",
          outcome: History.outcomeOf(status),
          status,
          startedAt,
          endedAt: history.now(),
          waitMs: 15_000,
          messages,
        });
        if (attempt > 0) retriedOnSurvivor++;
        if (messages?.length) {
          received.set(room.code, messages);
          const ids = messages.map((m) => m.id);
          const ackStarted = history.now();
          const acked = await client.ack(room.code, room.b, ids, { node: 1 });
          history.record({
            kind: "ack",
            room: room.code,
            seat: "b",
            outcome: History.outcomeOf(acked.status),
            status: acked.status,
            startedAt: ackStarted,
            endedAt: history.now(),
            ids,
          });
          return;
        }
      }
    });
    const subscribed = async () => ((await admin.call("PUBSUB", "SHARDCHANNELS", `${prefix}*`)) as string[]).length;
    for (const deadline = Date.now() + 20_000; (await subscribed()) < ROOMS && Date.now() < deadline; )
      await sleep(100);
    expect(await subscribed()).toBe(ROOMS);

    // As a real client does: an answer that is not a definite one (no answer, 503) is
    // retried with the same idempotency key, so a loaded machine cannot leave a send unknown.
    const send = async (room: (typeof rooms)[number]) => {
      const text = messageText(room.code, "a", 0);
      for (let attempt = 0; attempt < 10; attempt++) {
        const startedAt = history.now();
        const reply = await client
          .send(room.code, room.a, text, "k-a-0", { node: 1 })
          .catch(() => ({ status: 0, body: {} as { id?: string } }));
        history.record({
          kind: "send",
          room: room.code,
          seat: "a",
          text,
          idempotencyKey: "k-a-0",
          outcome: History.outcomeOf(reply.status),
          status: reply.status,
          startedAt,
          endedAt: history.now(),
          id: reply.body.id,
        });
        if (reply.status !== 0 && reply.status !== 503) return;
        await sleep(200);
      }
    };
    // Half the sends race the kill; the other half land after it.
    const firstHalf = Promise.all(rooms.slice(0, ROOMS / 2).map(send));
    await sleep(20);
    doomed.process!.kill("SIGKILL");
    await firstHalf;
    await Promise.all(rooms.slice(ROOMS / 2).map(send));
    await Promise.all(receivers);

    const result = checkHistory(history);
    const figures = {
      waitingRecvs: ROOMS,
      acknowledgedSends: result.acknowledgedSends,
      received: received.size,
      lost: result.lost,
      duplicates: result.duplicates,
      recvRetriedOnSurvivor: retriedOnSurvivor,
      connectionErrors: history.operations.filter((o) => o.kind === "recv" && o.status === 0).length,
    };
    console.log(`FIGURES node-kill ${JSON.stringify(figures)}`);
    expect(result.violations).toEqual([]);
    expect(result.acknowledgedSends).toBe(ROOMS);
    expect(received.size).toBe(ROOMS);
    expect(result.lost).toBe(0);
  }, 120_000);
});

describe("rolling restart of every node (SIGTERM, one at a time) under traffic", () => {
  it(
    "client-visible errors 0: answers are all 2xx (or a mailbox_full back-pressure 429), nothing lost or duplicated",
    async () => {
      const prefix = uniquePrefix();
      const env = { REDIS_URL: process.env.REDIS_URL!, REDIS_KEY_PREFIX: prefix, SHUTDOWN_DRAIN_SECONDS: "5" };
      const nodes = await Promise.all([0, 1, 2].map(() => startTarget("process", env)));
      const client = new FailoverClient(nodes.map((n) => n.client.baseUrls[0]!));
      const history = new History();
      try {
        const deadline = Date.now() + (SOAK ? 600_000 : 90_000);
        const rooms = await openRooms(client, SOAK ? 40 : 10, deadline);
        // Traffic runs until every node has been restarted, however fast this machine is (a
        // fixed count once finished before the last restart on a quiet machine).
        let trafficDone = false;
        let restartsDone = false;
        const traffic = runRoomsWorkload(rooms, {
          client,
          history,
          recvWaitMs: 3000,
          sendGapMs: 30,
          deadline,
          stopSending: () => restartsDone,
        }).finally(() => (trafficDone = true));
        const restartMs: number[] = [];
        // Each restart, on the history's clock: from SIGTERM to the new node ready.
        const windows: { node: number; start: number; end: number }[] = [];
        for (let round = 0; round < (SOAK ? 3 : 1); round++) {
          for (let i = 0; i < nodes.length; i++) {
            await sleep(1000);
            const started = Date.now();
            const start = history.now();
            await nodes[i]!.close(); // SIGTERM, resolves on exit
            nodes[i] = await startTarget("process", env);
            client.baseUrls[i] = nodes[i]!.client.baseUrls[0]!;
            restartMs.push(Date.now() - started);
            windows.push({ node: i, start, end: history.now() });
          }
        }
        expect(trafficDone).toBe(false);
        restartsDone = true;
        await traffic;

        const result = checkHistory(history);
        const visible = history.operations.filter(
          (o) => o.outcome !== "ok" && !(o.status === 429 && o.error === "mailbox_full"),
        );
        const sendsDuring = windows.map(({ node, start, end }) => ({
          node,
          acknowledged: history.operations.filter(
            (o) => o.kind === "send" && o.outcome === "ok" && o.startedAt >= start && o.startedAt < end,
          ).length,
        }));
        const figures = {
          restarts: restartMs.length,
          medianRestartMs: median(restartMs),
          operations: result.operations,
          acknowledgedSends: result.acknowledgedSends,
          acknowledgedSendsDuringEachRestart: sendsDuring.map((w) => w.acknowledged),
          clientVisibleErrors: visible.length,
          callsThatFailedOver: client.failovers,
          emptyRecvs: history.operations.filter(
            (o) => o.kind === "recv" && o.outcome === "ok" && o.messages?.length === 0,
          ).length,
          lost: result.lost,
          duplicates: result.duplicates,
        };
        console.log(`FIGURES rolling-restart ${JSON.stringify(figures)}`);
        expect(visible.map((o) => `${o.kind} ${o.status} ${o.error}`)).toEqual([]);
        expect(result.violations).toEqual([]);
        // Every send the clients made was acknowledged.
        const attempted = new Set(history.operations.filter((o) => o.kind === "send").map((o) => o.text)).size;
        expect(result.acknowledgedSends).toBe(attempted);
        // And the traffic covered every restart: sends were made and acknowledged while each
        // node was going down and coming back (how many depends on the machine's speed).
        expect(sendsDuring.filter((w) => w.acknowledged === 0)).toEqual([]);
      } finally {
        await Promise.all(nodes.map((n) => n.close()));
      }
    },
    SOAK ? 700_000 : 120_000,
  );
});
