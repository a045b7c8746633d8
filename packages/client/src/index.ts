// @duet/client: the typed SDK of the duet relay (the CLI lives in ./cli).
export { DuetClient } from "./client.js";
export { DEFAULT_BASE_URL } from "./transport.js";
export { DuetE2eError } from "./encrypted-room.js";
export type * from "./options.js";
export type { SelftestOptions, SelftestReport } from "./selftest.js";
export * from "./errors.js";
export { E2eSession, newRoomKey, roomKeyInText, joinUrlWithKey, type E2eState, type E2eRejectReason } from "./e2e.js";
export { extractRoomCode, type ExtractedRoom } from "./room-input.js";
export type {
  EndpointInput,
  EndpointResponse,
  OperationId,
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
