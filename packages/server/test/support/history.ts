// A Jepsen-style history of client operations and a checker for duet's delivery promises.
// Concurrent clients record every call as ok (the server answered 2xx), fail (a definite
// refusal: 4xx, nothing happened) or unknown (503, timeout, reset, node gone: it may or may
// not have happened). The checker then verifies, from the client's view alone:
//   - every send that returned an id is received (by id, with its text) before it is acked, or its room ended;
//   - no message is delivered again after its ack completed, and no id names two messages;
//   - all sends with one idempotency key resolve to one id, and one text is stored once;
//   - order within a direction holds;
//   - nothing is received that nobody sent, and nothing a definite failure refused.
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

/** Thread-safe enough for one event loop: operations are appended as they complete. */
export class History {
  readonly operations: Operation[] = [];
  private readonly epoch = performance.now();

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
export const messageText = (room: string, seat: string, seq: number, padding = "") => `m|${room}|${seat}|${seq}|${padding}`;

const parseText = (text: string) => {
  const [tag, room, seat, seq] = text.split("|");
  if (tag !== "m" || room === undefined || seat === undefined || seq === undefined) return undefined;
  return { room, seat, seq: Number(seq) };
};

export interface CheckResult {
  violations: string[];
  /** Sends answered with an id. */
  acknowledgedSends: number;
  /** Acknowledged sends never received (the headline "lost" figure). */
  lost: number;
  /** Texts stored under more than one id. */
  duplicates: number;
  /** Messages delivered (by id and text) by a recv that started after their ack completed. */
  redeliveredAfterAck: number;
  /** Ids delivered for more than one message (a lost write's id minted again). */
  idsReused: number;
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
  /** A request slower than its wait plus this is counted as hung. */
  hungMarginMs?: number;
}

export function checkHistory(history: History, options: CheckOptions = {}): CheckResult {
  const ops = history.operations;
  const margin = options.hungMarginMs ?? 2000;
  const violations: string[] = [];
  const violate = (message: string) => violations.length < 50 && violations.push(message);

  // ---- sends: key -> one id; text -> one id ------------------------------------------
  const idsByKey = new Map<string, Set<string>>();
  const attemptedTexts = new Map<string, Outcome[]>();
  const okSendIds = new Map<string, { room: string; to: string; text: string }>();
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
    okSendIds.set(`${op.room}|${op.id}`, { room: op.room, to: op.seat === "a" ? "b" : "a", text: op.text! });
  }
  for (const [key, ids] of idsByKey) if (ids.size > 1) violate(`idempotency key ${key} resolved to ${ids.size} ids: ${[...ids].join(",")}`);

  // ---- recvs: phantom, duplicates, order ---------------------------------------------
  const idsByText = new Map<string, Set<string>>();
  const received = new Set<string>();
  // By id AND text: after a failover loses a write, its id can be minted again for another
  // message, and that one's delivery must not count as the lost one's.
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
        violate(`phantom message ${message.id} in ${op.room}: nobody sent ${JSON.stringify(message.text.slice(0, 80))}`);
        continue;
      }
      if (attempts.every((outcome) => outcome === "fail")) violate(`message ${message.id} was stored though every send of it was refused`);
      if (parsed.seq <= lastSeq) violate(`order broken in ${op.room} from ${message.from}: seq ${parsed.seq} after ${lastSeq}`);
      lastSeq = parsed.seq;
      const textKey = `${op.room}|${message.from}|${message.text}`;
      const ids = idsByText.get(textKey) ?? new Set<string>();
      ids.add(message.id);
      idsByText.set(textKey, ids);
      const sent = okSendIds.get(`${op.room}|${message.id}`);
      if (sent && sent.text !== message.text) violate(`id ${message.id} in ${op.room} came back with another text`);
    }
  }
  let duplicates = 0;
  for (const [text, ids] of idsByText) {
    if (ids.size > 1) {
      duplicates += ids.size - 1;
      violate(`one send stored ${ids.size} times: ${text.slice(0, 80)} as ${[...ids].join(",")}`);
    }
  }

  // ---- acks: received before acked, never delivered after ----------------------------
  // Deliveries of each id, with their text: after a failover loses writes, a new master can
  // mint a lost id again for another message. An ack acknowledges the texts its seat had
  // received under that id; only those coming back after it count as undone.
  const deliveries = new Map<string, { endedAt: number; text: string }[]>();
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    for (const message of op.messages ?? []) {
      const key = `${op.room}|${message.id}`;
      deliveries.set(key, [...(deliveries.get(key) ?? []), { endedAt: op.endedAt, text: message.text }]);
    }
  }
  let idsReused = 0;
  for (const [key, list] of deliveries) {
    if (new Set(list.map((d) => d.text)).size > 1) {
      idsReused++;
      violate(`id ${key} delivered for ${new Set(list.map((d) => d.text)).size} different messages`);
    }
  }
  const acks = new Map<string, { endedAt: number; texts: Set<string> }[]>();
  for (const op of ops.filter((o) => o.kind === "ack")) {
    for (const id of op.ids ?? []) {
      const key = `${op.room}|${id}`;
      if (!received.has(key)) violate(`ack of ${id} in ${op.room}, never received`);
      if (op.outcome !== "ok") continue;
      const texts = new Set((deliveries.get(key) ?? []).filter((d) => d.endedAt <= op.startedAt).map((d) => d.text));
      acks.set(key, [...(acks.get(key) ?? []), { endedAt: op.endedAt, texts }]);
    }
  }
  let redeliveredAfterAck = 0;
  for (const op of ops.filter((o) => o.kind === "recv" && o.outcome === "ok")) {
    for (const message of op.messages ?? []) {
      const undone = (acks.get(`${op.room}|${message.id}`) ?? []).find((ack) => ack.endedAt < op.startedAt && ack.texts.has(message.text));
      if (undone) {
        redeliveredAfterAck++;
        violate(`id ${message.id} in ${op.room} delivered by a recv started ${Math.round(op.startedAt - undone.endedAt)} ms after its ack`);
      }
    }
  }

  // ---- loss ----------------------------------------------------------------------------
  let lost = 0;
  for (const [key, sent] of okSendIds) {
    if (receivedTexts.has(`${key}|${sent.text}`) || options.endedRooms?.has(sent.room)) continue;
    lost++;
    violate(`acknowledged send ${key} (${sent.text.slice(0, 60)}) never received`);
  }

  // ---- hung requests and unknowns --------------------------------------------------------
  const hungOps = ops.filter((op) => op.endedAt - op.startedAt > (op.waitMs ?? 0) + margin);
  const hung = hungOps.length;
  const hungExamples = hungOps
    .sort((x, y) => y.endedAt - y.startedAt - (x.endedAt - x.startedAt))
    .slice(0, 10)
    .map((op) => `${op.kind} ${op.status}${op.error ? ` ${op.error}` : ""} ${Math.round(op.endedAt - op.startedAt)}ms wait ${op.waitMs ?? 0} at ${Math.round(op.startedAt)}`);
  const unknownSends = ops.filter((o) => o.kind === "send" && o.outcome === "unknown");
  const resolvedKeys = new Set([...idsByKey.keys()]);
  const unknownResolved = unknownSends.filter((o) => o.idempotencyKey !== undefined && resolvedKeys.has(`${o.room}|${o.seat}|${o.idempotencyKey}`)).length;

  return {
    violations,
    acknowledgedSends: okSendIds.size,
    lost,
    duplicates,
    redeliveredAfterAck,
    idsReused,
    hung,
    hungExamples,
    unknownOutcomes: ops.filter((o) => o.outcome === "unknown").length,
    unknownResolved,
    operations: ops.length,
  };
}
