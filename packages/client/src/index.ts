// @duet/client: the typed SDK of the duet relay (the CLI lives in ./cli).
export * from "./client.js";
export * from "./errors.js";
export { E2eSession, newRoomKey, roomKeyInText, joinUrlWithKey, type E2eState, type E2eRejectReason } from "./e2e.js";
export { extractRoomCode, type ExtractedRoom } from "./room-input.js";
export type {
  Message,
  OpenResponse,
  JoinResponse,
  SendResponse,
  RecvResponse,
  AckResponse,
  StatusResponse,
  CloseResponse,
  StatsResponse,
} from "@duet/protocol";
export { CLIENT_VERSION } from "./version.js";
