// Steady traffic for fault tests: in each paired room both seats send a numbered sequence
// (with idempotency keys, retried until answered) and long-poll, ack what they receive,
// and record every call in a History. Bounded by a message count and a deadline.
import { History, messageText, type Delivered, type Operation } from "./history";
import type { Reply, TestClient } from "./http-client";

export interface WorkloadOptions {
  client: TestClient;
  history: History;
  /** Messages each seat sends. */
  messagesPerSeat: number;
  /** recv wait, ms. */
  recvWaitMs?: number;
  /**
   * Senders start no call after this Date.now(). Receivers go on draining for DRAIN_MS more: a
   * send started before the deadline may be answered 200 up to its 10 s ceiling after it, and a
   * message the relay accepted must still be received (else the history shows it lost).
   */
  deadline: number;
  /** Pause between sends, ms (steady traffic rather than a burst). */
  sendGapMs?: number;
  /** Use idempotency keys (the safe client); without, a send is never retried after an unknown outcome. */
  idempotent?: boolean;
  /** Padding appended to each text. */
  padding?: string;
  /** Senders stop starting new messages once this returns true; receivers then drain. */
  stopSending?: () => boolean;
}

export interface Room {
  code: string;
  a: string;
  b: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long receivers go on after the deadline: a send's 10 s ceiling, then a recv that does not wait. */
const DRAIN_MS = 12_000;

/** One call with a client-side ceiling, turned into an operation record. */
async function timedCall(
  history: History,
  base: Omit<Operation, "outcome" | "status" | "startedAt" | "endedAt">,
  call: (signal: AbortSignal) => Promise<Reply>,
  ceilingMs: number,
) {
  const startedAt = history.now();
  let reply: Reply | undefined;
  let error: string | undefined;
  try {
    reply = await call(AbortSignal.timeout(ceilingMs));
  } catch (caught) {
    error = (caught as Error).name === "TimeoutError" ? "client timeout" : String((caught as Error).cause ?? caught);
  }
  const status = reply?.status ?? 0;
  const op: Operation = {
    ...base,
    outcome: History.outcomeOf(status),
    status,
    error: error ?? reply?.body?.error,
    message: reply?.body?.message,
    startedAt,
    endedAt: history.now(),
  };
  return { op, reply };
}

/** Runs both seats of one room until each has sent and received everything, or the deadline. */
export async function runRoomWorkload(room: Room, options: WorkloadOptions): Promise<{ ended: boolean }> {
  const { client, history } = options;
  const recvWaitMs = options.recvWaitMs ?? 2000;
  const n = options.messagesPerSeat;
  const idempotent = options.idempotent ?? true;
  const senderDone = { a: false, b: false };
  let ended = false;

  const sender = async (seat: "a" | "b") => {
    const token = room[seat];
    for (let seq = 0; seq < n && !ended && !options.stopSending?.() && Date.now() < options.deadline; seq++) {
      const text = messageText(room.code, seat, seq, options.padding);
      const key = idempotent ? `k-${seat}-${seq}` : undefined;
      while (Date.now() < options.deadline && !ended) {
        const { op, reply } = await timedCall(
          history,
          { kind: "send", room: room.code, seat, text, idempotencyKey: key },
          (signal) => client.send(room.code, token, text, key, { signal }),
          10_000,
        );
        if (op.outcome === "ok") op.id = reply!.body.id;
        history.record(op);
        if (op.outcome === "ok") break;
        if (op.status === 404) ended = true;
        // Without a key, an unknown outcome cannot be retried safely: move on.
        if (op.outcome === "unknown" && !idempotent) break;
        if (op.status === 409) break;
        await sleep(op.status === 429 ? 100 : 150);
      }
      if (options.sendGapMs) await sleep(options.sendGapMs);
    }
    senderDone[seat] = true;
  };

  const receiver = async (seat: "a" | "b") => {
    const token = room[seat];
    const peer = seat === "a" ? "b" : "a";
    const seen = new Set<string>();
    const drainUntil = options.deadline + DRAIN_MS;
    while (Date.now() < drainUntil && !ended) {
      const peerFinished = senderDone[peer];
      const { op, reply } = await timedCall(
        history,
        { kind: "recv", room: room.code, seat, waitMs: peerFinished ? 0 : recvWaitMs },
        (signal) => client.recv(room.code, token, peerFinished ? 0 : recvWaitMs, { signal }),
        recvWaitMs + 10_000,
      );
      if (op.outcome === "ok")
        op.messages = (reply!.body.messages as Delivered[]).map(({ id, from, text }) => ({ id, from, text }));
      history.record(op);
      if (op.status === 404) ended = true;
      if (op.outcome !== "ok") {
        await sleep(150);
        continue;
      }
      const ids = op.messages!.map((m) => m.id);
      for (const message of op.messages!) seen.add(message.text);
      if (ids.length > 0) {
        // Ack until the server confirms it (ack is idempotent).
        while (Date.now() < drainUntil && !ended) {
          const acked = await timedCall(
            history,
            { kind: "ack", room: room.code, seat, ids },
            (signal) => client.ack(room.code, token, ids, { signal }),
            10_000,
          );
          history.record(acked.op);
          if (acked.op.outcome === "ok") break;
          if (acked.op.status === 404) ended = true;
          await sleep(150);
        }
      } else if (peerFinished) {
        return; // the peer has stopped sending and nothing is pending
      }
      if (seen.size >= n && senderDone[peer]) return;
    }
  };

  await Promise.all([sender("a"), sender("b"), receiver("a"), receiver("b")]);
  return { ended };
}

/** Opens and joins a room, retrying through faults until the deadline. */
export async function openRoomWithRetry(client: TestClient, deadline: number): Promise<Room> {
  let last = "";
  while (Date.now() < deadline) {
    try {
      return await client.pairedRoom();
    } catch (error) {
      last = String(error);
      await sleep(200);
    }
  }
  throw new Error(`could not open a room before the deadline: ${last}`);
}

/** `count` rooms opened at once with openRoomWithRetry. */
export const openRooms = (client: TestClient, count: number, deadline: number): Promise<Room[]> =>
  Promise.all(Array.from({ length: count }, () => openRoomWithRetry(client, deadline)));

/**
 * The workload in every room at once (runRoomWorkload), all with the same options; without
 * messagesPerSeat, the seats send until stopSending or the deadline.
 */
export const runRoomsWorkload = (
  rooms: Room[],
  options: Omit<WorkloadOptions, "messagesPerSeat"> & { messagesPerSeat?: number },
) => Promise.all(rooms.map((room) => runRoomWorkload(room, { messagesPerSeat: 1_000_000, ...options })));

/**
 * Keeps a recv waiting on a seat until the signal, as a client does: a 503 (a loaded node may
 * shed a call) is retried after its Retry-After. Anything else (an error, a message where none
 * was sent) is pushed to failed, and ends the loop.
 */
export async function holdRecv(
  client: TestClient,
  code: string,
  token: string,
  signal: AbortSignal,
  failed: string[],
): Promise<void> {
  while (!signal.aborted) {
    try {
      const reply = await client.recv(code, token, 20_000, { signal });
      if (reply.status === 503) await sleep(Number(reply.headers.get("retry-after") ?? 1) * 1000);
      else if (reply.status !== 200 || reply.body.messages.length > 0)
        return void failed.push(`${reply.status} ${reply.text}`);
    } catch (error) {
      if (signal.aborted) return;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return void failed.push(`${String(error)}${cause ? ` (${cause.code ?? cause.message})` : ""}`);
    }
  }
}

/** A call as a client makes it: a 503 (a node shedding load, a slow store) is retried after its Retry-After. */
export async function asClient<T extends { status: number; headers: Headers }>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    const reply = await call();
    if (reply.status !== 503) return reply;
    await sleep(Number(reply.headers.get("retry-after") ?? 1) * 1000);
  }
}

export const median = (values: number[]) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((x, y) => x - y);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

export const percentile = (values: number[], p: number) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};
