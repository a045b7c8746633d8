// What each operation of the endpoint table does, once: the REST routes (room-routes.ts) and
// the MCP tools (mcp.ts) both call these, so both have the same semantics, limits and errors.
// Inputs arrive validated by the table's schemas; bearer operations get the token's hash only.
import {
  MAX_TEXT_BYTES,
  MAX_WAIT_MS,
  isE2eEnvelope,
  type EndpointParsedInput,
  type EndpointResponse,
  type JoinResponse,
  type OpenResponse,
  type OperationId,
  type StatusResponse,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { RelayMetrics } from "../metrics.js";
import type { GoneSignal, WaitingRecvs } from "../realtime/wait-for-messages.js";
import { digestText } from "../store/credentials.js";
import type { InboxSnapshot, RoomStore, StoreTally } from "../store/room-store.js";
import { E2E_NOTE, renderShareBlock } from "./join-page.js";

export interface OperationDeps {
  store: RoomStore;
  waitingRecvs: WaitingRecvs;
  metrics: RelayMetrics;
  wakeRecheckMs: number;
  /** The (cached) tally behind /v1/stats. */
  readTally: () => Promise<StoreTally>;
}

export interface OperationContext {
  /** SHA-256 of the seat token; present for every bearer operation. */
  tokenHash: string;
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
/** A signal nobody aborts, for callers that cannot go away mid-call. */
const messagesOf = (snapshot: InboxSnapshot | undefined) => snapshot && { messages: snapshot.messages };
const NEVER: GoneSignal = { aborted: false, addEventListener: () => undefined, removeEventListener: () => undefined };

export function operations({ store, waitingRecvs, metrics, wakeRecheckMs, readTally }: OperationDeps): Operations {
  return {
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
        share: renderShareBlock(grant.code, joinUrl, baseUrl),
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

    async recv(query, { tokenHash, signal, onWaiting }) {
      const waitMs = query.wait ?? MAX_WAIT_MS;
      const waiting = waitingRecvs.waitForMessages(
        { code: query.code, tokenHash },
        { waitMs, recheckMs: wakeRecheckMs, signal: signal ?? NEVER },
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

    async status({ code, wait }, { tokenHash, signal }) {
      // wait > 0 long-polls until the peer's seat is claimed (`duet wait`), like a waiting recv.
      const status = await waitingRecvs.waitForPeer(
        { code, tokenHash },
        { waitMs: wait ?? 0, recheckMs: wakeRecheckMs, signal: signal ?? NEVER },
      );
      if (!status) return undefined;
      const body: StatusResponse = {
        seat: status.seat,
        members: status.members,
        expires_in: seconds(status.expiresInMs),
        peer_joined: status.peerJoined,
        peer_active: status.peerActive,
        pending_in: status.pendingIn,
        pending_out: status.pendingOut,
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
  };
}
