// REDIS_WRITE_ACK_REPLICAS=all: how many replicas a change must reach, from the masters'
// own `INFO replication` (docs/high-availability.md, "Write-ack all"). Pure logic on a
// fake clock; the integration test (test/integration/write-ack-all.test.ts) runs it against
// real replicas.
import {
  ATTACHED_LAG_SECONDS,
  parseReplication,
  PROBE_EVERY_MS,
  ReplicaCount,
  servesAnotherMaster,
} from "../../src/store/redis/write-ack";

const info = (replid: string, replicas: string[], role = "master") =>
  [
    "# Replication",
    `role:${role}`,
    `connected_slaves:${replicas.length}`,
    ...replicas.map((r, i) => `slave${i}:${r}`),
    "master_failover_state:no-failover",
    `master_replid:${replid}`,
    "master_replid2:0000000000000000000000000000000000000000",
    "master_repl_offset:1234",
    "",
  ].join("\r\n");
const online = (port: number, lag = 0) => `ip=10.0.0.1,port=${port},state=online,offset=1234,lag=${lag}`;

describe("INFO replication, as write-ack all reads it", () => {
  it("counts replicas online and heard from recently; not one still syncing or quiet too long", () => {
    const parsed = parseReplication(
      info("abc", [
        online(1),
        "ip=10.0.0.1,port=2,state=wait_bgsave,offset=0,lag=0",
        online(3, ATTACHED_LAG_SECONDS),
        online(4, ATTACHED_LAG_SECONDS + 1),
      ]),
    );
    expect(parsed).toEqual({ role: "master", replid: "abc", attached: ["10.0.0.1:1", "10.0.0.1:3"] });
    expect(parseReplication(info("abc", [], "slave")).role).toBe("slave");
  });
});

describe("ReplicaCount", () => {
  let now = 0;
  const count = () => new ReplicaCount(10_000, () => now);
  beforeEach(() => {
    now = 1_000_000;
  });

  it("asks for one replica before it knows the master, then for every replica it has", () => {
    const c = count();
    expect(c.knows("")).toBe(false);
    expect(c.expected("")).toBe(1);
    expect(c.observe("", info("m", [online(1), online(2)]))).toBe(2);
    expect(c.knows("")).toBe(true);
    expect(c.expected("")).toBe(2);
  });

  it("never fewer than one, even when the master has none", () => {
    const c = count();
    expect(c.observe("", info("m", []))).toBe(1);
  });

  it("a replica that leaves is still waited for during the grace, then no longer", () => {
    const c = count();
    c.observe("", info("m", [online(1), online(2)]));
    now += 1000;
    // Replica 2 left (promoted away, or failed): a change confirmed by replica 1 alone is not enough yet.
    expect(c.observe("", info("m", [online(1)]))).toBe(2);
    now += 9_999;
    expect(c.expected("")).toBe(2);
    now += 1;
    expect(c.expected("")).toBe(1);
    expect(c.observe("", info("m", [online(1)]))).toBe(1);
  });

  it("a replica that goes quiet starts its grace as one that disconnects does; one that comes back ends it", () => {
    const c = count();
    c.observe("", info("m", [online(1), online(2)]));
    now += 6000;
    expect(c.observe("", info("m", [online(1), online(2, ATTACHED_LAG_SECONDS + 1)]))).toBe(2);
    now += 5000;
    expect(c.observe("", info("m", [online(1), online(2)]))).toBe(2);
    now += 60_000;
    // Back for good: no grace left running out.
    expect(c.observe("", info("m", [online(1), online(2)]))).toBe(2);
    now += 1;
    expect(c.observe("", info("m", [online(1)]))).toBe(2);
  });

  it("a new master (a promotion: another replication id) counts its own replicas, not the old master's", () => {
    const c = count();
    c.observe("", info("old", [online(1), online(2)]));
    // The failover: the relay reconnects to the promoted replica, whose only replica is the other one.
    c.forget("");
    expect(c.knows("")).toBe(false);
    expect(c.observe("", info("new", [online(2)]))).toBe(1);
    expect(c.expected("")).toBe(1);
    // The old master comes back as a replica: from then on it counts.
    expect(c.observe("", info("new", [online(2), online(9)]))).toBe(2);
  });

  it("the old master, still reachable after a failover, keeps waiting for the replica promoted away from it", () => {
    const c = count();
    c.observe("", info("old", [online(1), online(2)]));
    now += 100;
    c.observe("", info("new", [online(2)]));
    now += 100;
    // Back on the old master (a relay that has not yet heard of the switch): its replica 1 was
    // promoted, replica 2 has not yet left for the new master. Replica 2 alone is not enough.
    expect(c.observe("", info("old", [online(2)]))).toBe(2);
    now += 100;
    expect(c.observe("", info("old", []))).toBe(2);
  });

  it("on a replica nothing can be confirmed", () => {
    const c = count();
    expect(c.observe("", info("m", [], "slave"))).toBe(Number.POSITIVE_INFINITY);
  });

  it("keeps each cluster node's master apart", () => {
    const c = count();
    c.observe("10.0.0.1:7000", info("a", [online(1)]));
    c.observe("10.0.0.2:7000", info("b", [online(1), online(2)]));
    expect(c.expected("10.0.0.1:7000")).toBe(1);
    expect(c.expected("10.0.0.2:7000")).toBe(2);
    expect(c.knows("10.0.0.3:7000")).toBe(false);
  });
});

describe("ReplicaCount with a probe: a replica that left is asked where it went", () => {
  let now = 0;
  /** What each replica answers to INFO replication (undefined: it does not answer). */
  let answers: Map<string, string | undefined>;
  const probe = async (address: string) => answers.get(address);
  const count = () => new ReplicaCount(10_000, () => now, probe);
  const settled = () => new Promise((resolve) => setImmediate(resolve));
  const asReplicaOf = (replid: string, link = "up") =>
    ["# Replication", "role:slave", `master_link_status:${link}`, `master_replid:${replid}`, ""].join("\r\n");
  beforeEach(() => {
    now = 1_000_000;
    answers = new Map();
  });

  it("tells a replica serving another master from one following this one, or syncing", () => {
    expect(servesAnotherMaster(info("new", []), "m")).toBe(true);
    expect(servesAnotherMaster(asReplicaOf("new"), "m")).toBe(true);
    expect(servesAnotherMaster(asReplicaOf("m"), "m")).toBe(false);
    // A replica still syncing reports the id it had: not a sign of another master.
    expect(servesAnotherMaster(asReplicaOf("new", "down"), "m")).toBe(false);
  });

  it("one promoted away (it answers as a master) is waited for past the grace: this master has been failed over", async () => {
    const c = count();
    c.observe("", info("m", [online(1), online(2)]));
    answers.set("10.0.0.1:2", info("new", []));
    expect(c.observe("", info("m", [online(1)]))).toBe(2);
    await settled();
    now += 60_000;
    // Sentinel has not moved replica 1 yet (slow, in TILT): it alone must not confirm anything.
    expect(c.observe("", info("m", [online(1)]))).toBe(2);
    // Replica 1 follows the new master too: nothing here can reach two replicas any more.
    answers.set("10.0.0.1:1", asReplicaOf("new"));
    expect(c.observe("", info("m", []))).toBe(2);
  });

  it("one that does not answer is down: after the grace, changes go on without it; if it turns up as a master, it counts again", async () => {
    const c = count();
    c.observe("", info("m", [online(1), online(2)]));
    expect(c.observe("", info("m", [online(1)]))).toBe(2);
    await settled();
    now += 10_000;
    expect(c.expected("")).toBe(1);
    await settled();
    answers.set("10.0.0.1:2", info("new", []));
    now += PROBE_EVERY_MS;
    c.expected(""); // asks again
    await settled();
    expect(c.expected("")).toBe(2);
  });

  it("one back with this master (syncing, or following it again) ends its grace as usual", async () => {
    const c = count();
    c.observe("", info("m", [online(1), online(2)]));
    answers.set("10.0.0.1:2", asReplicaOf("m"));
    expect(c.observe("", info("m", [online(1)]))).toBe(2);
    await settled();
    now += 10_000;
    expect(c.expected("")).toBe(1);
  });

  it("past the grace, one not yet answered is still waited for", () => {
    const c = count();
    c.observe("", info("m", [online(1), online(2)]));
    answers.set("10.0.0.1:2", info("new", []));
    c.observe("", info("m", [online(1)]));
    now += 10_000; // the answer has not come back (no await)
    expect(c.expected("")).toBe(2);
  });
});
