import { MAX_WAIT_MS } from "@duet/protocol";
import { median, percentile } from "../support/workload";
import { ownRedis } from "../support/own-redis";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const RECHECK_SECONDS = 3600;
// A lost wake-up leaves its recv waiting this long, then answered empty: far longer than any
// re-read after a reconnect, however busy the machine.
const RECV_WAIT_MS = MAX_WAIT_MS;
const SOAK = process.env.DUET_SOAK === "1";

describe("subscriber connection killed repeatedly", () => {
  const own = ownRedis({ kind: "redis-3-nodes", env: { WAKE_RECHECK_SECONDS: String(RECHECK_SECONDS) } });

  it("delivers 100% of messages, each to the recv waiting for it, with no periodic re-read", async () => {
    const { client } = own.target;
    const ROOMS = SOAK ? 60 : 20;
    const ROUNDS = SOAK ? 50 : 10;
    const rooms = await Promise.all(Array.from({ length: ROOMS }, () => client.pairedRoom()));
    let killing = true;
    let kills = 0;
    const killer = (async () => {
      while (killing) {
        await sleep(100 + Math.random() * 300);
        kills += Number(await own.admin.call("CLIENT", "KILL", "TYPE", "pubsub"));
      }
    })();

    const delays: number[] = [];
    let delivered = 0;
    let sent = 0;
    /** Waiting recvs that waited out their whole wait and came back empty: a lost wake-up. */
    let wokenNever = 0;
    await Promise.all(
      rooms.map(async (room, r) => {
        for (let round = 0; round < ROUNDS; round++) {
          const text = `r${r}-${round}`;
          // The recv waits on one node; the send goes to the next (round robin).
          const waiting = client.recv(room.code, room.b, RECV_WAIT_MS).then((reply) => ({ reply, at: Date.now() }));
          await sleep(50 + Math.random() * 250);
          let sentAt = 0;
          for (let attempt = 0; attempt < 20 && !sentAt; attempt++) {
            const reply = await client.send(room.code, room.a, text, `k${round}`);
            if (reply.status === 200) sentAt = Date.now();
            else await sleep(100);
          }
          expect(sentAt).toBeGreaterThan(0);
          sent++;
          let { reply, at } = await waiting;
          // A recv answered 503 (a kill during its first read) is simply repeated; one that
          // came back empty waited out its whole wait: the wake-up was lost.
          for (let attempt = 0; attempt < 5 && !(reply.status === 200 && reply.body.messages.length); attempt++) {
            if (reply.status === 200) wokenNever++;
            else expect(reply.status).toBe(503);
            reply = await client.recv(room.code, room.b, 0);
            at = Date.now();
          }
          const message = reply.body.messages?.find((m: { text: string }) => m.text === text);
          if (message) {
            delivered++;
            delays.push(Math.max(0, at - sentAt));
            await client.ack(room.code, room.b, [message.id]);
          }
        }
      }),
    );
    killing = false;
    await killer;

    const figures = {
      messages: sent,
      delivered,
      subscriberKills: kills,
      wokenNever,
      medianDelayMs: median(delays),
      p99DelayMs: percentile(delays, 99),
      maxDelayMs: Math.max(...delays),
      recheckMs: RECHECK_SECONDS * 1000,
    };
    console.log(`FIGURES subscriber-kill ${JSON.stringify(figures)}`);
    expect(kills).toBeGreaterThan(5);
    expect(delivered).toBe(ROOMS * ROUNDS);
    expect(wokenNever).toBe(0);
  }, 600_000);
});
