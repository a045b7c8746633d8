// A Jepsen-style history of client operations and a checker for duet's delivery promises.
// Concurrent clients record every call as ok (the server answered 2xx), fail (a definite
// refusal: 4xx, nothing happened) or unknown (503, timeout, reset, node gone: it may or may
// not have happened). The checker then verifies, from the client's view alone:
//   - every send that returned an id is returned by each recv of its reader that starts after
//     it, until acked (or its room ended); one no later recv could return is unverified;
//   - no message is delivered again after its ack completed, and no id names two messages;
//   - all sends with one idempotency key resolve to one id, and one text is stored once;
//   - order within a direction holds;
//   - nothing is received that nobody sent, and nothing a definite failure refused.
// Where Redis may lose its last writes when killed (appendfsync everysec: see
// docs/reliability.md), the caller passes the kills, and an acknowledged send or ack that was
// undone counts as a violation unless a kill explains it: a kill came after it, and no write
// made after it and before that kill survived (a killed Redis loses a tail of its writes).
// Sent texts carry their (room, seat, sequence) so the checker can tell them apart.

export type Outcome = "ok" | "fail" | "unknown";

export interface Delivered {
  id: string;
  from: string;
  text: string;
}

export interface Operation {
  kind: "send" | "recv" | "ack" | "close";
  room: string;
  seat: "a" | "b";
  outcome: Outcome;
  /** HTTP status, or 0 when no answer came (reset, timeout, refused). */
  status: number;
  error?: string;
  /** The error's message, as the relay gave it (tells one cause of a 503 from another). */
  message?: string;
  startedAt: number;
  endedAt: number;
  /** A name for calls outside the workload (probes). */
  label?: string;
  /** recv: the wait asked for, to tell a hung request from a long poll. */
  waitMs?: number;
  /** send */
  text?: string;
  idempotencyKey?: string;
  id?: string;
  /** recv: what came back. */
  messages?: Delivered[];
  /** ack: the ids asked for. */
  ids?: string[];
}

/**
 * The event loop's own stalls, on the history's clock: a timer that should tick every
 * tickMs, and how late each tick came. On a machine this loaded (two cores, relays, Redis
 * and clients in one process), a stall delays every timer and socket read, the relay's
 * timeouts included. "Hung" means a request waited on something past its bound; time the
 * process was not given to run is not that, and is allowed for.
 */
export class StallClock {
  private readonly stalls: { start: number; end: number }[] = [];
  private last: number;

  constructor(
    readonly now: () => number,
    readonly tickMs = 20,
  ) {
    this.last = now();
    setInterval(() => {
      const at = now();
      // A tick more than 10 ms late: the loop was held for the lateness.
      if (at - this.last > tickMs + 10) this.stalls.push({ start: this.last + tickMs, end: at });
      this.last = at;
    }, tickMs).unref();
  }

  /**
   * Milliseconds of stall between start and end. Stalls are recorded in time order and do not
   * overlap, so a binary search finds the first one that can count: a long loaded run records
   * tens of thousands, and the checker asks once per operation.
   */
  within(start: number, end: number): number {
    let low = 0;
    let high = this.stalls.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.stalls[middle]!.end <= start) low = middle + 1;
      else high = middle;
    }
    let total = 0;
    for (let i = low; i < this.stalls.length && this.stalls[i]!.start < end; i++) {
      const stall = this.stalls[i]!;
      total += Math.max(0, Math.min(end, stall.end) - Math.max(start, stall.start));
    }
    return total;
  }
}

/** Thread-safe enough for one event loop: operations are appended as they complete. */
export class History {
  readonly operations: Operation[] = [];
  private readonly epoch = performance.now();
  /** Stalls of this process's event loop, to tell a hung request from a starved machine. */
  readonly stalls = new StallClock(() => this.now());

  now(): number {
    return performance.now() - this.epoch;
  }

  record(operation: Operation): Operation {
    this.operations.push(operation);
    return operation;
  }

  /** Classifies an HTTP answer (or its absence) the way a careful client must. */
  static outcomeOf(status: number): Outcome {
    if (status >= 200 && status < 300) return "ok";
    // 5xx and no answer at all: the operation may have happened.
    if (status === 0 || status >= 500) return "unknown";
    return "fail";
  }
}

/** The text a workload sends: unique, and naming its sender and place in the sequence. */
export const messageText = (room: string, seat: string, seq: number, padding = "") =>
  `m|${room}|${seat}|${seq}|${padding}`;

const parseText = (text: string) => {
  const [tag, room, seat, seq] = text.split("|");
  if (tag !== "m" || room === undefined || seat === undefined || seq === undefined) return undefined;
  return { room, seat, seq: Number(seq) };
};

export interface CheckResult {
  violations: string[];
  /** Sends answered with an id. */
  acknowledgedSends: number;
  /** Acknowledged sends missing from a recv of their reader that started after them (the headline "lost" figure). */
  lost: number;
  /**
   * Acknowledged sends never received and never missing either: no successful recv of their
   * reader started after them. A sign of unavailability (or a workload cut short), not of
   * loss; a violation all the same (its message says which), since the workload was meant
   * to read everything.
   */
  unverified: number;
  /** Of lost and redeliveredAfterAck: those a kill explains (only with options.kills). */
  undoneByKill: number;
  /** The first of them (up to 10), to read. */
  undoneByKillExamples: string[];
  /** Texts stored under more than one id. */
  duplicates: number;
  /** Messages delivered (by id and text) by a recv that started after their ack completed. */
  redeliveredAfterAck: number;
  /** Ids acknowledged or delivered for more than one message: never explained by a kill. */
  idsReused: number;
  /** Messages first delivered to a reader after a message with a larger id: a stream resumed
   *  after the last id its client saw (Last-Event-ID, ?after) would skip them. */
  skippedOnResume: number;
  /** Requests that took longer than their wait plus hungMarginMs. */
  hung: number;
  /** The slowest of them (up to 10): kind, status, ms, wait. */
  hungExamples: string[];
  unknownOutcomes: number;
  /** Unknown sends later resolved to an id by a retry with the same key. */
  unknownResolved: number;
  operations: number;
}

export interface CheckOptions {
  /** Rooms that ended (closed with force, expired) before being drained: loss is allowed there. */
  endedRooms?: Set<string>;
  /** A request slower than its wait plus this (plus the event loop's stalls meanwhile) is counted as hung. */
  hungMarginMs?: number;
  /**
   * Redis kills (history times: signal sent, Redis answering again) where Redis may lose the
   * tail of its acknowledged writes (appendfsync everysec with a busy disk). Without them,
   * every undone write is a violation.
   */
  kills?: { issuedAt: number; restartedAt: number }[];
}

/**
 * The longest a call may take beyond its wait, as docs/reliability.md ("No request hangs")
 * bounds it with the settings the fault tests use: a store call waits on while Redis's
 * replies keep coming, up to twice REDIS_COMMAND_TIMEOUT_MS (1 s), plus the write-ack WAIT
 * (REDIS_WRITE_ACK_TIMEOUT_MS, 0.5 s), plus up to 0.5 s for the request limit's lease on a
 * node holding no token for the caller. A call slower than that hung.
 */
export const HUNG_MARGIN_MS = 2 * 1000 + 500 + 500;

export function checkHistory(history: History, options: CheckOptions = {}): CheckResult {
  const ops = history.operations;
  const margin = options.hungMarginMs ?? HUNG_MARGIN_MS;
  const violations: string[] = [];
  const violate = (message: string) => violations.length < 50 && violations.push(message);

  // ---- sends: key -> one id; text -> one id ------------------------------------------
  const idsByKey = new Map<string, Set<string>>();
  const attemptedTexts = new Map<string, Outcome[]>();
  // Acknowledged sends by text, and the texts acknowledged under each id (more than one is the
  // defect counted as idsReused below).
  const okSends = new Map<string, { room: string; id: string; text: string; op: Operation }>();
  const okTextsById = new Map<string, Set<string>>();
  for (const op of ops.filter((o) => o.kind === "send")) {
    const textKey = `${op.room}|${op.seat}|${op.text}`;
    attemptedTexts.set(textKey, [...(attemptedTexts.get(textKey) ?? []), op.outcome]);
    if (op.outcome !== "ok") continue;
    if (!op.id) {
      violate(`send ok without an id: ${JSON.stringify(op)}`);
      continue;
    }
    if (op.idempotencyKey !== undefined) {
      const key = `${op.room}|${op.seat}|${op.idempotencyKey}`;
      const ids = idsByKey.get(key) ?? new Set<string>();
      ids.add(op.id);
      idsByKey.set(key, ids);
    }
    okSends.set(textKey, { room: op.room, id: op.id, text: op.text!, op });
    okTextsById.set(`${op.room}|${op.id}`, (okTextsById.get(`${op.room}|${op.id}`) ?? new Set()).add(op.text!));
  }
  for (const [key, ids] of idsByKey)
    if (ids.size > 1) violate(`idempotency key ${key} resolved to ${ids.size} ids: ${[...ids].join(",")}`);

  // ---- recvs: phantom, duplicates, order ---------------------------------------------
  const idsByText = new Map<string, Set<string>>();
  const received = new Set<string>();
  // By id AND text: should an id ever name two messages (counted below), one's delivery must
  // not count as the other's.
  const receivedTexts = new Set<string>();
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    let lastSeq = -1;
    const seen = new Set<string>();
    for (const message of op.messages ?? []) {
      if (message.from === op.seat) violate(`recv for ${op.seat} returned its own message ${message.id} in ${op.room}`);
      if (seen.has(message.id)) violate(`recv returned id ${message.id} twice in one answer`);
      seen.add(message.id);
      received.add(`${op.room}|${message.id}`);
      receivedTexts.add(`${op.room}|${message.id}|${message.text}`);
      const parsed = parseText(message.text);
      const attempts = attemptedTexts.get(`${op.room}|${message.from}|${message.text}`);
      if (!parsed || parsed.room !== op.room || parsed.seat !== message.from || !attempts) {
        violate(
          `phantom message ${message.id} in ${op.room}: nobody sent ${JSON.stringify(message.text.slice(0, 80))}`,
        );
        continue;
      }
      if (attempts.every((outcome) => outcome === "fail"))
        violate(`message ${message.id} was stored though every send of it was refused`);
      if (parsed.seq <= lastSeq)
        violate(`order broken in ${op.room} from ${message.from}: seq ${parsed.seq} after ${lastSeq}`);
      lastSeq = parsed.seq;
      const textKey = `${op.room}|${message.from}|${message.text}`;
      const ids = idsByText.get(textKey) ?? new Set<string>();
      ids.add(message.id);
      idsByText.set(textKey, ids);
      const sentTexts = okTextsById.get(`${op.room}|${message.id}`);
      if (sentTexts && !sentTexts.has(message.text))
        violate(`id ${message.id} in ${op.room} came back with another text`);
    }
  }

  // ---- acks: received before acked, never delivered after ----------------------------
  // Deliveries of each id, with their text. An ack acknowledges the texts its seat had
  // received under that id; only those coming back after it count as undone.
  const deliveries = new Map<string, { startedAt: number; endedAt: number; text: string }[]>();
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    for (const message of op.messages ?? []) {
      const key = `${op.room}|${message.id}`;
      deliveries.set(key, [
        ...(deliveries.get(key) ?? []),
        { startedAt: op.startedAt, endedAt: op.endedAt, text: message.text },
      ]);
    }
  }

  // ---- writes undone by a Redis kill --------------------------------------------------
  // A killed Redis that had not yet written its last writes to the AOF (everysec, while a
  // background fsync is slow) comes back without them: a tail of what it executed. So an
  // undone write needs a kill after it, and no write made after it and before that kill may
  // have survived: a send acknowledged in between and delivered after the restart proves
  // the kill lost no tail reaching back that far.
  const kills = [...(options.kills ?? [])].sort((x, y) => x.issuedAt - y.issuedAt);
  const lastDeliveryStart = new Map<string, number>();
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    for (const message of op.messages ?? []) {
      const key = `${op.room}|${message.id}|${message.text}`;
      lastDeliveryStart.set(key, Math.max(lastDeliveryStart.get(key) ?? -Infinity, op.startedAt));
    }
  }
  let undoneByKill = 0;
  const undoneByKillExamples: string[] = [];
  /**
   * Undefined when a kill explains an undone write that ran within [startedAt, endedAt] and
   * was seen undone by `seenBy`; otherwise why not.
   */
  const unexplained = (startedAt: number, endedAt: number, seenBy: number): string | undefined => {
    if (kills.length === 0) return "";
    const kill = kills.find((k) => k.issuedAt > startedAt);
    if (!kill || kill.issuedAt >= seenBy) return " (no Redis kill came between it and the sign that it was undone)";
    // Still running at the kill: it may have run just before it, or after the restart and
    // been lost by a later kill; nothing to compare it with.
    if (endedAt >= kill.issuedAt) return undefined;
    for (const later of okSends.values()) {
      if (later.op.startedAt <= endedAt || later.op.endedAt >= kill.issuedAt) continue;
      if ((lastDeliveryStart.get(`${later.room}|${later.id}|${later.text}`) ?? -Infinity) > kill.restartedAt) {
        return ` (not a lost AOF tail: ${later.text.slice(0, 40)}, acknowledged after it and before the kill at ${Math.round(kill.issuedAt)} ms, survived that kill)`;
      }
    }
    return undefined;
  };
  const undone = (description: string, startedAt: number, endedAt: number, seenBy: number, count: () => void) => {
    const why = unexplained(startedAt, endedAt, seenBy);
    if (why === undefined) {
      undoneByKill++;
      if (undoneByKillExamples.length < 10) undoneByKillExamples.push(description);
    } else {
      count();
      violate(description + why);
    }
  };

  // An id given to two messages is a defect whatever happened to Redis: ids come from the
  // Redis clock and never go back, even when a kill or a failover loses writes
  // (docs/protocol.md §2). Seen in acknowledged sends or in deliveries.
  let idsReused = 0;
  const textsById = new Map<string, Set<string>>(okTextsById);
  for (const [key, list] of deliveries)
    for (const d of list) textsById.set(key, new Set(textsById.get(key)).add(d.text));
  for (const [key, texts] of textsById) {
    if (texts.size < 2) continue;
    idsReused++;
    violate(`id ${key} given to ${texts.size} different messages`);
  }
  // A send stored twice: the copy delivered first was undone by a kill with its idempotency
  // record, and a retry of the same key stored it again.
  let duplicates = 0;
  const firstAttempt = new Map<string, number>();
  for (const op of ops.filter((o) => o.kind === "send")) {
    const key = `${op.room}|${op.seat}|${op.text}`;
    if (!firstAttempt.has(key)) firstAttempt.set(key, op.startedAt);
  }
  for (const [textKey, ids] of idsByText) {
    if (ids.size < 2) continue;
    const [room, , ...rest] = textKey.split("|");
    const text = rest.join("|");
    const firstSeen = (id: string) =>
      Math.min(...(deliveries.get(`${room}|${id}`) ?? []).filter((d) => d.text === text).map((d) => d.endedAt));
    const copies = [...ids].sort((x, y) => firstSeen(x) - firstSeen(y));
    for (let i = 0; i + 1 < copies.length; i++) {
      const description = `one send stored ${ids.size} times: ${textKey.slice(0, 80)} as ${copies.join(",")}`;
      undone(
        description,
        firstAttempt.get(textKey) ?? -Infinity,
        firstSeen(copies[i]!),
        firstSeen(copies[i + 1]!),
        () => duplicates++,
      );
    }
  }

  const acks = new Map<string, { startedAt: number; endedAt: number; texts: Set<string> }[]>();
  for (const op of ops.filter((o) => o.kind === "ack")) {
    for (const id of op.ids ?? []) {
      const key = `${op.room}|${id}`;
      if (!received.has(key)) violate(`ack of ${id} in ${op.room}, never received`);
      if (op.outcome !== "ok") continue;
      const texts = new Set((deliveries.get(key) ?? []).filter((d) => d.endedAt <= op.startedAt).map((d) => d.text));
      acks.set(key, [...(acks.get(key) ?? []), { startedAt: op.startedAt, endedAt: op.endedAt, texts }]);
    }
  }
  let redeliveredAfterAck = 0;
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    for (const message of op.messages ?? []) {
      const ack = (acks.get(`${op.room}|${message.id}`) ?? []).find(
        (a) => a.endedAt < op.startedAt && a.texts.has(message.text),
      );
      if (ack) {
        undone(
          `id ${message.id} in ${op.room} delivered by a recv started ${Math.round(op.startedAt - ack.endedAt)} ms after its ack`,
          ack.startedAt,
          ack.endedAt,
          op.endedAt,
          () => redeliveredAfterAck++,
        );
      }
    }
  }

  // ---- resume order ----------------------------------------------------------------------
  // Ids increase with the store's clock, so a message first delivered to a reader comes
  // after everything that reader saw before it. One that does not would be skipped by a
  // client resuming after the last id it saw (docs/protocol.md §2, §6.5). Each reader's
  // recvs run one at a time: their start order is their order.
  let skippedOnResume = 0;
  const highestSeen = new Map<string, number>();
  const firstDelivered = new Set<string>();
  for (const op of ops
    .filter((o) => o.kind === "recv" && o.outcome === "ok")
    .sort((x, y) => x.startedAt - y.startedAt)) {
    const reader = `${op.room}|${op.seat}`;
    const before = highestSeen.get(reader) ?? -Infinity;
    let highest = before;
    for (const message of op.messages ?? []) {
      const id = Number(message.id);
      const key = `${op.room}|${message.id}|${message.text}`;
      if (!firstDelivered.has(key)) {
        firstDelivered.add(key);
        if (id <= before) {
          skippedOnResume++;
          violate(
            `message ${message.id} in ${op.room} first delivered after id ${before}: a client resuming after that id would skip it`,
          );
        }
      }
      highest = Math.max(highest, id);
    }
    highestSeen.set(reader, highest);
  }

  // ---- loss ----------------------------------------------------------------------------
  // Loss is a recv that should have returned an acknowledged send and did not: the peer's
  // successful recv started after the send was answered (recv returns every pending message,
  // docs/protocol.md §6.2). A send that no later recv could have returned (its reader gave up
  // on 503s, or the workload's guard ended first) is unverified: unavailability, not loss.
  const readsBy = new Map<string, Operation[]>();
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    const reader = `${op.room}|${op.seat}`;
    const reads = readsBy.get(reader);
    if (reads) reads.push(op);
    else readsBy.set(reader, [op]);
  }
  let lost = 0;
  let unverified = 0;
  for (const sent of okSends.values()) {
    const key = `${sent.room}|${sent.id}`;
    if (receivedTexts.has(`${key}|${sent.text}`) || options.endedRooms?.has(sent.room)) continue;
    const reader = `${sent.room}|${sent.op.seat === "a" ? "b" : "a"}`;
    const witness = (readsBy.get(reader) ?? [])
      .filter((read) => read.startedAt > sent.op.endedAt)
      .sort((x, y) => x.startedAt - y.startedAt)[0];
    if (!witness) {
      unverified++;
      violate(
        `acknowledged send ${key} (${sent.text.slice(0, 60)}) unverified: no recv of its reader succeeded after it was answered (unavailability, not loss)`,
      );
      continue;
    }
    const description = `acknowledged send ${key} (${sent.text.slice(0, 60)}) missing from a recv started ${Math.round(witness.startedAt - sent.op.endedAt)} ms after it was answered`;
    undone(description, sent.op.startedAt, sent.op.endedAt, witness.startedAt, () => {});
    lost++;
  }

  // ---- hung requests and unknowns --------------------------------------------------------
  const hungOps = ops.filter((op) => isHung(history, op, margin));
  const hung = hungOps.length;
  const hungExamples = hungOps
    .sort((x, y) => y.endedAt - y.startedAt - (x.endedAt - x.startedAt))
    .slice(0, 10)
    .map(
      (op) =>
        `${op.kind} ${op.status}${op.error ? ` ${op.error}` : ""} ${Math.round(op.endedAt - op.startedAt)}ms wait ${op.waitMs ?? 0} at ${Math.round(op.startedAt)} (event loop stalled ${Math.round(history.stalls.within(op.startedAt, op.endedAt))}ms meanwhile)`,
    );
  const unknownSends = ops.filter((o) => o.kind === "send" && o.outcome === "unknown");
  const resolvedKeys = new Set([...idsByKey.keys()]);
  const unknownResolved = unknownSends.filter(
    (o) => o.idempotencyKey !== undefined && resolvedKeys.has(`${o.room}|${o.seat}|${o.idempotencyKey}`),
  ).length;

  return {
    violations,
    acknowledgedSends: okSends.size,
    lost,
    unverified,
    undoneByKill,
    undoneByKillExamples,
    duplicates,
    redeliveredAfterAck,
    idsReused,
    skippedOnResume,
    hung,
    hungExamples,
    unknownOutcomes: ops.filter((o) => o.outcome === "unknown").length,
    unknownResolved,
    operations: ops.length,
  };
}

/**
 * Whether a request took longer than its wait plus margin, not counting the time this
 * process's event loop was stalled meanwhile (see StallClock).
 */
export function isHung(
  history: History,
  op: Pick<Operation, "startedAt" | "endedAt" | "waitMs">,
  margin = HUNG_MARGIN_MS,
): boolean {
  return op.endedAt - op.startedAt - history.stalls.within(op.startedAt, op.endedAt) > (op.waitMs ?? 0) + margin;
}
