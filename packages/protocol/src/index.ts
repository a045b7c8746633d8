// @duet/protocol: the wire contract shared by the duet server and client.
export * from "./e2e.js";
export * from "./errors.js";
export * from "./limits.js";
export * from "./message.js";
export * from "./room-code.js";
export * from "./schemas.js";
export { buildOpenApiDocument } from "./openapi.js";
export * from "./room-ending.js";
export * from "./endpoints.js";
