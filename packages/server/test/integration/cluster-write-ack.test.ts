// Write-ack on a Redis Cluster with one replica per master: the WAIT must go to the master
// that ran the script (a pipeline routes by its first key, and WAIT has none). Stopping the
// replica of the master that holds one room makes that room's changes answer 503, while a
// room on another master is unaffected; once the replica is back, the retried send answers
// the same id. (A WAIT sent to another master would have confirmed at once.)
import { Redis } from "ioredis";
import { RedisKeys } from "../../src/store/redis/keys";
import { ownCluster } from "../support/own-redis";

async function slotOf(port: number, key: string): Promise<number> {
  const client = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 0 });
  try {
    return Number(await client.cluster("KEYSLOT", key));
  } finally {
    client.disconnect();
  }
}

/**
 * As a client does: retries a call that answered 503 (a replica slow to confirm on a loaded
 * machine), with the same idempotency key where it has one. Any other answer is returned.
 */
async function retried503<T extends { status: number }>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const reply = await call();
    if (reply.status !== 503 || attempt >= 20) return reply;
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("write-ack on a cluster (REDIS_WRITE_ACK_REPLICAS=1)", () => {
  // Node timeout 15 s: a replica stopped for a moment is not failed over or forgotten.
  const own = ownCluster(
    3,
    { replicas: 1, nodeTimeoutMs: 15_000 },
    { REDIS_WRITE_ACK_REPLICAS: "1", REDIS_WRITE_ACK_TIMEOUT_MS: "1000" },
  );

  it("a stopped replica blocks only its own master's rooms; the retry once it is back answers the same id", async () => {
    const { client } = own.target;
    const keys = new RedisKeys(own.target.config.redis!.keyPrefix);
    const view = await own.cluster.view();
    const masterOf = async (code: string) => {
      const slot = await slotOf(own.cluster.nodes[0]!.port, keys.room(code)[0]);
      return view.find((n) => n.role === "master" && n.slots.some(([from, to]) => slot >= from && slot <= to))!;
    };
    // Two rooms on two different masters.
    const pairedRoom = async () => {
      const opened = await retried503(() => client.open());
      expect(opened.status).toBe(200);
      const joined = await retried503(() => client.join(opened.body.code));
      expect(joined.status).toBe(200);
      return { code: opened.body.code as string, a: opened.body.token as string, b: joined.body.token as string };
    };
    const first = await pairedRoom();
    const firstMaster = await masterOf(first.code);
    let other = await pairedRoom();
    while ((await masterOf(other.code)).port === firstMaster.port) other = await pairedRoom();
    const replica = view.find((n) => n.role === "replica" && n.masterId === firstMaster.id)!;
    const replicaProcess = own.cluster.nodes.find((n) => n.port === replica.port)!.process;

    replicaProcess.kill("SIGSTOP");
    let refused;
    try {
      refused = await client.send(first.code, first.a, "needs its replica", "k1");
      // Another master's replica confirms its own master's writes.
      expect((await retried503(() => client.send(other.code, other.a, "elsewhere", "k1"))).status).toBe(200);
    } finally {
      replicaProcess.kill("SIGCONT");
    }
    expect(refused.status).toBe(503);
    expect(refused.body.error).toBe("unavailable");
    await own.cluster.waitHealthy(1);
    const retried = await retried503(() => client.send(first.code, first.a, "needs its replica", "k1"));
    expect(retried.status).toBe(200);
    const inbox = await client.recv(first.code, first.b, 0);
    expect(inbox.body.messages.map((m: { id: string; text: string }) => [m.id, m.text])).toEqual([
      [retried.body.id, "needs its replica"],
    ]);
  }, 120_000);
});
