// Write-ack: a state change answers success only once replicas confirm they have it
// (docs/high-availability.md). Each change goes as ONE pipeline on one connection:
//
//   EVALSHA <script> …            the change itself
//   WAIT <n> <timeout>             how many replicas have this connection's last write
//   INFO replication               "all" only: which replicas the master has right now
//
// REDIS_WRITE_ACK_REPLICAS=N asks WAIT for a fixed N. "all" asks for every replica the
// master has (ReplicaCount below), never fewer than one: the promoted replica of a failover
// was one of them, so it has every acknowledged change, and after the failover the new
// master's replicas are what counts, not the one that failed.
import calculateSlot from "cluster-key-slot";
import { Cluster, ReplyError } from "ioredis";
import { apiError, type ApiError } from "../../errors.js";
import type { RedisClient } from "./connection.js";
import { scriptSource, type ScriptName, type ScriptReply } from "./scripts.js";
import { REDIS_DEFAULTS } from "../../config.js";

/** A fixed number of replicas, or "all": every replica the master has, never fewer than one. */
export type WriteAckReplicas = number | "all";

/** Acknowledged means replicated: state changes answer success once WAIT confirms the replicas. */
export interface WriteAck {
  /** The connection the pipelines go on (WAIT counts its own connection's writes). */
  client: RedisClient;
  replicas: WriteAckReplicas;
  timeoutMs: number;
  /** "all": how long a replica that left the master still counts (default DETACH_GRACE_MS). */
  graceMs?: number;
  /**
   * "all": `INFO replication` of a replica at its address as its master lists it (host:port),
   * undefined when it does not answer. With it, a replica that left is asked where it went,
   * and its grace does not run out while it serves another master (see DepartedReplica).
   */
  probe?: ReplicaProbe;
  /**
   * How long a change may take in all (the store's operation timeout, REDIS_COMMAND_TIMEOUT_MS):
   * bounds the changes queued behind WAITs that time out (see WriteAcknowledger.change).
   */
  operationTimeoutMs?: number;
}

/**
 * "all": a replica counts as attached while its master lists it `state=online` and heard
 * from it within this many seconds (replicas report every second). One that goes quiet
 * longer starts its grace (below), as one that disconnects does.
 */
export const ATTACHED_LAG_SECONDS = 5;

/**
 * "all": a replica that leaves the master (disconnects, goes quiet, or is promoted in its
 * place) is still waited for during this grace, then no longer. It covers the old master
 * of a failover that is still reachable (SENTINEL FAILOVER, a master that wakes up): its
 * promoted replica has left it, its other replicas are about to leave for the new master
 * and resync from it, and a change confirmed by them alone would be lost. Sentinel moves
 * them within a second or two of the promotion; 10 s leaves room. The price: a replica
 * that really fails costs this long of 503s before changes go on without it.
 */
export const DETACH_GRACE_MS = 10_000;

/** How often a replica that left is asked again where it went (PROBE_EVERY_MS), and for how long at most. */
export const PROBE_EVERY_MS = 1000;
const PROBE_FOR_MS = 600_000;

/** `INFO replication` of the node at host:port, undefined when it does not answer. */
export type ReplicaProbe = (address: string) => Promise<string | undefined>;

/**
 * Whether a replica that left a master (known by its replication id) now serves another:
 * it answers as a master (promoted), or follows a master with another replication id. Then
 * the master it left has been failed over, and every replica still with it will resync
 * from the new one and drop what it confirmed: that master must acknowledge nothing more.
 */
export function servesAnotherMaster(info: string, replid: string): boolean {
  const node = parseReplication(info);
  if (node.role === "master") return true;
  return /\bmaster_link_status:up\b/.test(info) && node.replid !== "" && node.replid !== replid;
}

/** A change that reached the master but not enough replicas: its outcome is unknown. */
export function notReplicated(confirmed: number, wanted: number): ApiError {
  const error = apiError(
    "unavailable",
    `The change reached ${confirmed} of the ${wanted} Redis replica(s) it must reach in time; retry (a send with the same idempotency_key is stored once).`,
  );
  error.retryAfterSeconds = 1;
  return error;
}

/** A change refused before it was sent: the replicas are not keeping up (nothing happened). */
function replicasBehind(): ApiError {
  const error = apiError(
    "unavailable",
    "Redis replicas are not confirming changes in time right now; retry (a send with the same idempotency_key is stored once).",
  );
  error.retryAfterSeconds = 1;
  return error;
}

/** Script replies that refuse the change (nothing to replicate: answer the refusal): a bare negative number. */
const refusedStatus = (reply: unknown) => typeof reply === "number" && reply < 0;

interface Replication {
  role: string;
  replid: string;
  /** host:port of each replica the master lists online and heard from within ATTACHED_LAG_SECONDS. */
  attached: string[];
}

/** The fields of `INFO replication` write-ack needs. */
export function parseReplication(info: string): Replication {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const at = line.indexOf(":");
    if (at > 0 && !line.startsWith("#")) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  const attached: string[] = [];
  for (const [name, value] of fields) {
    if (!/^slave\d+$/.test(name)) continue;
    const replica = new Map(value.split(",").map((pair) => pair.split("=") as [string, string]));
    if (replica.get("state") === "online" && Number(replica.get("lag") ?? Infinity) <= ATTACHED_LAG_SECONDS)
      attached.push(`${replica.get("ip")}:${replica.get("port")}`);
  }
  return { role: fields.get("role") ?? "", replid: fields.get("master_replid") ?? "", attached };
}

interface DepartedReplica {
  /** When it left (this process's clock). */
  at: number;
  /** With a probe: what the last answer said (undefined: none yet), and when it was asked. */
  elsewhere?: boolean;
  askedAt?: number;
  asking?: boolean;
}

interface MasterView {
  replid: string;
  attached: Set<string>;
  /** Replicas that left. */
  left: Map<string, DepartedReplica>;
  seenAt: number;
}

/**
 * For "all": what each master's replicas were, as the last change on it saw them. A master
 * is known by its replication id, which a promotion or a restart changes and a reconnect
 * does not: a new master starts from its own replicas, and an old master that is still
 * reachable keeps waiting for the ones that left it, for the grace.
 */
export class ReplicaCount {
  private readonly masters = new Map<string, MasterView>();
  /** Where a change goes ("" on one Redis; a cluster node's address) -> its master's replid. */
  private readonly replidAt = new Map<string, string>();

  constructor(
    readonly graceMs = DETACH_GRACE_MS,
    private readonly now: () => number = Date.now,
    private readonly probe?: ReplicaProbe,
  ) {}

  /**
   * Every replica attached, and every one that left within the grace. Past the grace, one
   * that left still counts while it serves another master (or, with a probe, until a first
   * answer says where it is): the grace alone would run out while Sentinel is slow to move
   * the master's other replicas (a sentinel in TILT stalls a failover for 30 s), and this
   * master and a replica about to resync away would then acknowledge changes the failover
   * throws away. One that does not answer is down: changes go on without it.
   */
  private required(view: MasterView | undefined): number {
    if (!view) return 1;
    let count = view.attached.size;
    const now = this.now();
    for (const [replica, departed] of view.left) {
      if (this.probe) this.ask(view, replica, departed, now);
      if (now - departed.at < this.graceMs) count++;
      else if (!this.probe || now - departed.at > PROBE_FOR_MS) view.left.delete(replica);
      else if (departed.elsewhere !== false) count++;
    }
    return Math.max(1, count);
  }

  /** Asks a replica that left where it went, at most every PROBE_EVERY_MS. */
  private ask(view: MasterView, replica: string, departed: DepartedReplica, now: number) {
    if (departed.asking || (departed.askedAt !== undefined && now - departed.askedAt < PROBE_EVERY_MS)) return;
    departed.asking = true;
    departed.askedAt = now;
    this.probe!(replica)
      .catch(() => undefined)
      .then((info) => {
        departed.asking = false;
        departed.elsewhere = info === undefined ? false : servesAnotherMaster(info, view.replid);
      });
  }

  /** Whether a change has told us which master is at `node`. */
  knows(node: string): boolean {
    return this.replidAt.has(node);
  }

  /** The master at `node` may have changed (a reconnect): learn it again before its next change. */
  forget(node: string): void {
    this.replidAt.delete(node);
  }

  /** WAIT's count for the next change sent to `node`: what its master needed last time. */
  expected(node: string): number {
    const replid = this.replidAt.get(node);
    return this.required(replid === undefined ? undefined : this.masters.get(replid));
  }

  /**
   * Records `INFO replication` of the master at `node`; returns the replicas a change there
   * needs (infinite when `node` answers as a replica: nothing can be confirmed there).
   */
  observe(node: string, info: string): number {
    const { role, replid, attached } = parseReplication(info);
    // A replica answering (the script would have failed READONLY first): nothing can be confirmed.
    if (role !== "master" || replid === "") return Number.POSITIVE_INFINITY;
    const now = this.now();
    this.replidAt.set(node, replid);
    let view = this.masters.get(replid);
    if (!view) {
      view = { replid, attached: new Set(), left: new Map(), seenAt: now };
      this.masters.set(replid, view);
      this.forgetOld(now);
    }
    const current = new Set(attached);
    for (const replica of view.attached) if (!current.has(replica)) view.left.set(replica, { at: now });
    for (const replica of current) view.left.delete(replica);
    view.attached = current;
    view.seenAt = now;
    return this.required(view);
  }

  /** Masters not written to for ten minutes: gone, or ours no longer. */
  private forgetOld(now: number) {
    for (const [replid, view] of this.masters) if (now - view.seenAt > 600_000) this.masters.delete(replid);
  }
}

type Arg = string | number;

/**
 * Runs state-changing scripts and answers their replies only once the replicas confirm
 * them. The script and WAIT go as ONE pipeline on one connection: WAIT waits for the
 * replication offset of its own connection's last write, so it must follow the script on
 * the same connection, and must never be sent again alone (on a new connection it would
 * answer at once and confirm a write that may be gone; autoResendUnfulfilledCommands is
 * off for that reason too). On a cluster the pipeline routes by the script's first key,
 * so WAIT and INFO (keyless) go to the master that ran the script. The script goes as
 * EVALSHA, and as EVAL in a second pipeline only if the first answered NOSCRIPT (then it
 * did not run: a promoted replica starts with an empty script cache). Not through
 * defineCommand here: its NOSCRIPT fallback re-sends the script on its own, after the
 * pipeline's WAIT has already answered, so that WAIT would confirm nothing.
 */
export class WriteAcknowledger {
  /** "all" only. */
  readonly count?: ReplicaCount;
  /**
   * Per master ("" on one Redis): changes sent and not yet answered, and whether the last
   * answered WAIT fell short (then each WAIT holds the connection for the whole timeout).
   */
  private readonly queues = new Map<string, { outstanding: number; shortOfReplicas: boolean }>();
  /** Changes that may wait behind WAITs falling short: as many as can still answer in time. */
  private readonly queueLimit: number;

  constructor(readonly ack: WriteAck) {
    this.queueLimit = Math.max(
      1,
      Math.floor((ack.operationTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs) / ack.timeoutMs),
    );
    if (ack.replicas === "all") {
      this.count = new ReplicaCount(ack.graceMs, Date.now, ack.probe);
      // A reconnect on one Redis may reach another master (Sentinel): learn its replicas
      // before the next change instead of asking WAIT for the old master's number.
      if (!(ack.client instanceof Cluster)) ack.client.on("ready", () => this.count?.forget(""));
    }
  }

  /** Where a change with this first key goes: "" on one Redis, the master's address on a cluster. */
  private nodeFor(firstKey: Arg): string {
    const client = this.ack.client;
    if (!(client instanceof Cluster)) return "";
    const slot = calculateSlot(String(firstKey));
    return client.slots[slot]?.[0] ?? `slot ${slot}`;
  }

  /** Reads the replicas of the master at `node` before its first change (a read: safe to send alone). */
  private async learn(count: ReplicaCount, node: string): Promise<void> {
    const client = this.ack.client;
    const target =
      client instanceof Cluster
        ? client.nodes("master").find((n) => `${n.options.host}:${n.options.port}` === node)
        : client;
    const info = await target?.info("replication").catch(() => undefined);
    if (info !== undefined) count.observe(node, info);
  }

  /**
   * Redis runs one connection's commands in order, and a WAIT that falls short holds the
   * connection for its whole timeout: while replicas are missing, changes queue behind
   * each other at one per timeout, run long after their callers were told 503, and the
   * queue outgrows any recovery. So while the last WAIT fell short, a change that would
   * wait behind more of them than can answer within the operation timeout is refused at
   * once (503, nothing sent: its retry is safe).
   */
  async change<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>> {
    const node = this.ack.client instanceof Cluster ? this.nodeFor(args[0]!) : "";
    let queue = this.queues.get(node);
    if (!queue) {
      queue = { outstanding: 0, shortOfReplicas: false };
      this.queues.set(node, queue);
    }
    if (queue.shortOfReplicas && queue.outstanding >= this.queueLimit) throw replicasBehind();
    queue.outstanding++;
    try {
      return await this.send(name, args, node, queue);
    } finally {
      queue.outstanding--;
    }
  }

  private async send<N extends ScriptName>(
    name: N,
    args: Arg[],
    node: string,
    queue: { shortOfReplicas: boolean },
  ): Promise<ScriptReply<N>> {
    const { ack, count } = this;
    const script = scriptSource(name);
    if (count && !count.knows(node)) await this.learn(count, node);
    const asked = count ? count.expected(node) : (ack.replicas as number);
    const attempt = async (how: "evalsha" | "eval") => {
      const pipeline = ack.client.pipeline();
      if (how === "evalsha") pipeline.evalsha(script.sha, script.numberOfKeys, ...args);
      else pipeline.eval(script.lua, script.numberOfKeys, ...args);
      pipeline.wait(asked, ack.timeoutMs);
      if (count) pipeline.info("replication");
      const results = await pipeline.exec();
      if (results?.length !== (count ? 3 : 2)) throw new Error("write-ack pipeline answered nothing");
      return results;
    };
    let results = await attempt("evalsha");
    if (results[0]![0] && /^NOSCRIPT\b/.test(results[0]![0].message)) results = await attempt("eval");
    const [[scriptError, reply], [waitError, confirmed], info] = results as [
      [Error | null, unknown],
      [Error | null, unknown],
      [Error | null, unknown]?,
    ];
    if (scriptError) {
      // ioredis updates a cluster's slot map on a single command's MOVED, not on a
      // pipeline's that it does not retry (WAIT is not read-only): refresh it here, or every
      // later pipeline would go to the demoted master and answer 503 for ever. The script did
      // not run; the client's retry reaches the new master.
      if (
        ack.client instanceof Cluster &&
        (!(scriptError instanceof ReplyError) || /^(MOVED|ASK|CLUSTERDOWN)\b/.test(scriptError.message))
      ) {
        ack.client.refreshSlotsCache();
      }
      throw scriptError;
    }
    if (!waitError) queue.shortOfReplicas = Number(confirmed) < asked;
    // A refusal stored nothing that matters: answer it whatever WAIT says.
    if (refusedStatus(reply)) return reply as ScriptReply<N>;
    if (waitError) throw waitError;
    let wanted = asked;
    if (count) {
      // Every replica the master has now (and those that left it within the grace): one
      // that came or went while WAIT ran counts, so WAIT's own target may have been too
      // high (after a failover the new master has fewer) or too low (the change then
      // answers 503, and the next one asks for the new number).
      if (!info || info[0]) throw info?.[0] ?? new Error("write-ack pipeline answered no INFO");
      wanted = count.observe(node, String(info[1]));
      if (!Number.isFinite(wanted)) throw notReplicated(Number(confirmed), asked);
    }
    if (Number(confirmed) < wanted) throw notReplicated(Number(confirmed), wanted);
    return reply as ScriptReply<N>;
  }
}
