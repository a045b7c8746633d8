// What each operation of the endpoint table does, once: the REST routes (room-routes.ts) and
// the MCP tools (mcp.ts) both call these, so both have the same semantics, limits and errors.
// Inputs arrive validated by the table's schemas; bearer operations get the token's hash for
// the store, and the token itself only to refuse a text that would carry it to the peer.
import {
  ENDPOINTS,
  MAX_TEXT_BYTES,
  OPERATION_IDS,
  peerTextField,
  MAX_WAIT_MS,
  isE2eEnvelope,
  type EndpointParsedInput,
  type EndpointResponse,
  type JoinResponse,
  type OpenResponse,
  type OperationId,
  type SelftestToolInput,
  type StatusResponse,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { RelayMetrics } from "../metrics.js";
import type { GoneSignal } from "../realtime/client-gone.js";
import type { WaitingRecvs } from "../realtime/long-polls.js";
import { digestText } from "../store/credentials.js";
import type { InboxSnapshot, RoomStore, StoreTally } from "../store/room-store.js";
import { E2E_NOTE, renderShareBlock } from "./join-page.js";
import { type HeldSelftests, selftestLongPoll, selftestProbe } from "./selftest.js";

export interface OperationDeps {
  store: RoomStore;
  waitingRecvs: WaitingRecvs;
  metrics: RelayMetrics;
  wakeRecheckMs: number;
  /** The (cached) tally behind /v1/stats. */
  readTally: () => Promise<StoreTally>;
  /** The longest a waiting MCP tool call holds its answer (MCP_MAX_WAIT_MS): the self-test tool's hold and advice. */
  mcpMaxWaitMs: number;
  /** Held self-tests, waiters under the node's cap. */
  selftests: HeldSelftests;
}

export interface OperationContext {
  /** SHA-256 of the seat token; present for every bearer operation. */
  tokenHash: string;
  /** The seat token itself (bearer operations), never stored or logged: a peer text that contains it is refused. */
  token?: string;
  /** The relay's public base URL, for join addresses and the share block. */
  baseUrl: string;
  /** The caller's address as the rate limits count it: whose budget of live rooms an open spends. */
  client?: string;
  /** Aborted when the caller went away or cancelled: a waiting recv stops waiting. */
  signal?: GoneSignal;
  /** Told when a recv starts waiting and every few seconds after (MCP progress notifications). */
  onWaiting?: (waitedMs: number, waitMs: number) => void;
}

/** undefined: the caller went away while waiting, there is nobody to answer. */
export type Operation<K extends OperationId> = (
  input: EndpointParsedInput<K>,
  context: OperationContext,
) => Promise<EndpointResponse<K> | undefined>;
export type Operations = { [K in OperationId]: Operation<K> };

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));
/** How often a waiting recv reports progress to a caller that asked for it. */
const PROGRESS_EVERY_MS = 5_000;
/**
 * recv's answer: one body per snapshot, so that the waiting recvs of a seat that shared a read
 * (realtime/long-polls.ts) share their rendered answer too (http/rendered.ts).
 */
const answers = new WeakMap<InboxSnapshot, { messages: InboxSnapshot["messages"] }>();
function messagesOf(snapshot: InboxSnapshot | undefined) {
  if (!snapshot) return undefined;
  if (snapshot.messages.length === 0) return { messages: snapshot.messages };
  const kept = answers.get(snapshot);
  if (kept) return kept;
  const body = { messages: snapshot.messages };
  answers.set(snapshot, body);
  return body;
}
/** A signal nobody aborts, for callers that cannot go away mid-call. */
const NEVER: GoneSignal = { aborted: false, addEventListener: () => undefined, removeEventListener: () => undefined };

/**
 * recv's and send's `ack` (docs/protocol.md, "Acks folded into recv and send"): the same store
 * call as POST /v1/ack, made before the call reads or sends. Its refusals (the room is gone,
 * a wrong token) are the call's own, answered before it reads or sends anything.
 */
async function ackAlong(store: RoomStore, seat: { code: string; tokenHash: string }, ids: string[] | undefined) {
  if (ids !== undefined && ids.length > 0) await store.ackMessages(seat, ids);
}

export function operations({
  store,
  waitingRecvs,
  metrics,
  wakeRecheckMs,
  readTally,
  mcpMaxWaitMs,
  selftests,
}: OperationDeps): Operations {
  return refusingOwnToken({
    async open({ e2e }, { baseUrl, client }) {
      const grant = await store.openRoom({ e2e: e2e === true, owner: client });
      metrics.roomsOpened.inc();
      const joinUrl = `${baseUrl}/join/${grant.code}`;
      const body: OpenResponse = {
        code: grant.code,
        seat: grant.seat,
        token: grant.token,
        expires_in: seconds(grant.expiresInMs),
        join_url: joinUrl,
        share: renderShareBlock(grant.code, joinUrl, baseUrl, grant.e2e),
      };
      if (grant.e2e) body.e2e = true;
      return body;
    },

    async join({ code }) {
      const grant = await store.joinRoom(code);
      metrics.roomsJoined.inc();
      const body: JoinResponse = {
        code: grant.code,
        seat: grant.seat,
        token: grant.token,
        expires_in: seconds(grant.expiresInMs),
      };
      if (grant.e2e) Object.assign(body, { e2e: true, e2e_note: E2E_NOTE });
      return body;
    },

    async send(input, { tokenHash }) {
      const bytes = Buffer.byteLength(input.text, "utf8");
      if (bytes > MAX_TEXT_BYTES) {
        throw apiError(
          "too_large",
          `text is larger than ${MAX_TEXT_BYTES} UTF-8 bytes; split it, or publish it at a URL and send the URL.`,
        );
      }
      // Acked first: the receipt lands even when the send is then refused (mailbox_full, a
      // conflict), and acking frees the mailbox space the send may need.
      await ackAlong(store, { code: input.code, tokenHash }, input.ack);
      const { id, replayed } = await store.sendMessage({
        code: input.code,
        tokenHash,
        text: input.text,
        idempotencyKey: input.idempotency_key,
        textDigest: input.idempotency_key === undefined ? undefined : digestText(input.text),
        envelope: isE2eEnvelope(input.text),
      });
      if (!replayed) {
        metrics.messages.inc();
        metrics.bytes.inc(bytes);
      }
      return { id };
    },

    async recv(query, { tokenHash, signal, onWaiting, client }) {
      const waitMs = query.wait ?? MAX_WAIT_MS;
      // Acked before the read, so the answer no longer holds them, and before the wait.
      await ackAlong(store, { code: query.code, tokenHash }, query.ack);
      const waiting = waitingRecvs.waitForMessages(
        { code: query.code, tokenHash },
        { waitMs, recheckMs: wakeRecheckMs, signal: signal ?? NEVER, client },
      );
      // Without progress reports, this call's frame is not kept for the wait: the answer is
      // made by a shared function when the wait ends.
      if (!onWaiting) return waiting.then(messagesOf);
      const started = Date.now();
      onWaiting(0, waitMs);
      const timer = setInterval(() => onWaiting(Date.now() - started, waitMs), PROGRESS_EVERY_MS);
      try {
        return messagesOf(await waiting);
      } finally {
        clearInterval(timer);
      }
    },

    async ack({ code, ids }, { tokenHash }) {
      const { acked } = await store.ackMessages({ code, tokenHash }, ids);
      return { ok: true, acked };
    },

    async status({ code, wait, until_read }, { tokenHash, signal, client }) {
      // wait > 0 long-polls, like a waiting recv: until the peer's seat is claimed (`duet
      // wait`), or with until_read until the caller's messages up to that id are read.
      const seat = { code, tokenHash };
      const options = { waitMs: wait ?? 0, recheckMs: wakeRecheckMs, signal: signal ?? NEVER, client };
      const status = await (until_read === undefined
        ? waitingRecvs.waitForPeer(seat, options)
        : waitingRecvs.waitUntilRead(seat, Number(until_read), options));
      if (!status) return undefined;
      const body: StatusResponse = {
        seat: status.seat,
        members: status.members,
        expires_in: seconds(status.expiresInMs),
        peer_joined: status.peerJoined,
        peer_active: status.peerActive,
        pending_in: status.pendingIn,
        pending_out: status.unread.length,
        unread: status.unread,
      };
      if (status.e2e) Object.assign(body, { e2e: true, e2e_note: E2E_NOTE });
      return body;
    },

    async close({ code, force }, { tokenHash }) {
      await store.closeRoom({ code, tokenHash }, force ?? false);
      metrics.roomsClosed.inc();
      return { ok: true };
    },

    async stats() {
      const tally = await readTally();
      return {
        sessions: tally.sessions,
        paired: tally.paired,
        messages: tally.messages,
        bytes: tally.bytes,
        rooms_open: tally.roomsOpen,
      };
    },

    // REST: the long-poll mode (GET /v1/selftest). The MCP tool's input is a named probe
    // (its own schema, SelftestToolInput), answered with SelftestToolResponse.
    selftest: (input, context) =>
      "probe" in input
        ? (selftestProbe(input as SelftestToolInput, context, store, mcpMaxWaitMs, selftests) as never)
        : selftestLongPoll(input, context, selftests),
  });
}

/**
 * Every operation whose input carries a text for the peer (the table's `carriesText.in`)
 * refuses one that holds the caller's own seat token: the peer would read it. A field error
 * (400), checked before the room (docs/protocol.md §6.1), on REST and MCP alike.
 */
function refusingOwnToken(operations: Operations): Operations {
  const guarded = { ...operations } as Record<OperationId, Operation<OperationId>>;
  for (const id of OPERATION_IDS) {
    const field = peerTextField(ENDPOINTS[id]);
    if (field === undefined) continue;
    const run = guarded[id];
    guarded[id] = async (input, context) => {
      const text = (input as Record<string, unknown> | undefined)?.[field];
      if (context.token !== undefined && typeof text === "string" && text.includes(context.token))
        throw apiError(
          "bad_request",
          `${field} contains your own seat token: never send it. Remove it and send again.`,
        );
      return run(input, context);
    };
  }
  return guarded as Operations;
}
