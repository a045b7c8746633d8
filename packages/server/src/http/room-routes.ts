// The seven room endpoints: open, join, send, recv, ack, status, close.
import { Router, type Request, type RequestHandler } from "express";
import {
  AckRequest,
  CloseRequest,
  JoinRequest,
  MAX_TEXT_BYTES,
  MAX_WAIT_MS,
  OpenRequest,
  RecvQuery,
  SendRequest,
  StatusQuery,
  isE2eEnvelope,
  type AckResponse,
  type CloseResponse,
  type JoinResponse,
  type OpenResponse,
  type RecvResponse,
  type SendResponse,
  type StatusResponse,
} from "@duet/protocol";
import { apiError } from "../errors.js";
import type { RelayMetrics } from "../metrics.js";
import type { WaitingRecvs } from "../realtime/wait-for-messages.js";
import { digestText } from "../store/credentials.js";
import type { RoomStore } from "../store/room-store.js";
import { seatTokenHash } from "./auth.js";
import { jsonBody } from "./body.js";
import { E2E_NOTE, renderShareBlock } from "./join-page.js";
import { parseInput } from "./validate.js";

export interface RoomRouteDeps {
  store: RoomStore;
  waitingRecvs: WaitingRecvs;
  metrics: RelayMetrics;
  baseUrl: (req: Request) => string;
  wakeRecheckMs: number;
  /** Applied to open and join on top of the general limit. */
  roomLimiter: RequestHandler;
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

// Express 5 forwards rejected promises to the error middleware.
type AsyncHandler = (req: Request, res: import("express").Response) => Promise<void>;
const route = (handler: AsyncHandler): RequestHandler => (req, res, next) => handler(req, res).catch(next);

export function roomRoutes({ store, waitingRecvs, metrics, baseUrl, wakeRecheckMs, roomLimiter }: RoomRouteDeps): Router {
  const router = Router();

  router.post("/v1/open", roomLimiter, jsonBody, route(async (req, res) => {
    const { e2e } = parseInput(OpenRequest, req.body ?? {}, "body");
    const grant = await store.openRoom({ e2e: e2e === true });
    metrics.roomsOpened.inc();
    const joinUrl = `${baseUrl(req)}/join/${grant.code}`;
    const body: OpenResponse = {
      code: grant.code,
      seat: grant.seat,
      token: grant.token,
      expires_in: seconds(grant.expiresInMs),
      join_url: joinUrl,
      share: renderShareBlock(grant.code, joinUrl, baseUrl(req)),
    };
    if (grant.e2e) body.e2e = true;
    res.json(body);
  }));

  router.post("/v1/join", roomLimiter, jsonBody, route(async (req, res) => {
    const { code } = parseInput(JoinRequest, req.body, "body");
    const grant = await store.joinRoom(code);
    metrics.roomsJoined.inc();
    const body: JoinResponse = { code: grant.code, seat: grant.seat, token: grant.token, expires_in: seconds(grant.expiresInMs) };
    if (grant.e2e) Object.assign(body, { e2e: true, e2e_note: E2E_NOTE });
    res.json(body);
  }));

  router.post("/v1/send", jsonBody, route(async (req, res) => {
    const tokenHash = seatTokenHash(req);
    const input = parseInput(SendRequest, req.body, "body");
    const bytes = Buffer.byteLength(input.text, "utf8");
    if (bytes > MAX_TEXT_BYTES) {
      throw apiError("too_large", `text is larger than ${MAX_TEXT_BYTES} UTF-8 bytes; split it, or publish it at a URL and send the URL.`);
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
    const body: SendResponse = { id };
    res.json(body);
  }));

  router.get("/v1/recv", route(async (req, res) => {
    const tokenHash = seatTokenHash(req);
    const query = parseInput(RecvQuery, req.query, "query");
    const abandoned = new AbortController();
    // 'close' on the response before it finished means the client went away: free the wait.
    // After a finished answer there is nothing to free, and abort() would only build an
    // AbortError (a DOMException with a stack) per recv for nobody: 0.8 % of a busy node's CPU.
    res.once("close", () => {
      if (!res.writableFinished) abandoned.abort();
    });
    const snapshot = await waitingRecvs.waitForMessages(
      { code: query.code, tokenHash },
      { waitMs: query.wait ?? MAX_WAIT_MS, recheckMs: wakeRecheckMs, signal: abandoned.signal },
    );
    if (!snapshot) return;
    const body: RecvResponse = { messages: snapshot.messages };
    res.json(body);
  }));

  router.post("/v1/ack", jsonBody, route(async (req, res) => {
    const tokenHash = seatTokenHash(req);
    const { code, ids } = parseInput(AckRequest, req.body, "body");
    const { acked } = await store.ackMessages({ code, tokenHash }, ids);
    const body: AckResponse = { ok: true, acked };
    res.json(body);
  }));

  router.get("/v1/status", route(async (req, res) => {
    const tokenHash = seatTokenHash(req);
    const { code } = parseInput(StatusQuery, req.query, "query");
    const status = await store.getStatus({ code, tokenHash });
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
    res.json(body);
  }));

  router.post("/v1/close", jsonBody, route(async (req, res) => {
    const tokenHash = seatTokenHash(req);
    const { code, force } = parseInput(CloseRequest, req.body, "body");
    await store.closeRoom({ code, tokenHash }, force ?? false);
    metrics.roomsClosed.inc();
    const body: CloseResponse = { ok: true };
    res.json(body);
  }));

  return router;
}

/** Paths of the room endpoints, with their one allowed method (for 405 answers). */
export const ROOM_ENDPOINTS: Record<string, "GET" | "POST"> = {
  "/v1/open": "POST",
  "/v1/join": "POST",
  "/v1/send": "POST",
  "/v1/recv": "GET",
  "/v1/ack": "POST",
  "/v1/status": "GET",
  "/v1/close": "POST",
  "/v1/stream": "GET",
};
