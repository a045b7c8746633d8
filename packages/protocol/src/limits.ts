// The numbers of the contract (docs/protocol.md §8 "Limits", §7, §9).
// Server and client both read them from here, so they cannot drift apart.

/** Largest accepted text, in UTF-8 bytes after JSON parsing (2 MiB). */
export const MAX_TEXT_BYTES = 2_097_152;
/** Unacked messages a room holds, both directions together. */
export const MAX_PENDING_MESSAGES = 8;
/** Unacked text a room holds, both directions together, in UTF-8 bytes. */
export const MAX_PENDING_BYTES = 2_097_152;
/**
 * Largest request body. Any legal text must fit whatever escaping the client used:
 * `\u0001` is six bytes of JSON for one byte of text, so 6 x 2 MiB plus room for the
 * other fields. Larger bodies get 400 too_large.
 */
export const MAX_BODY_BYTES = 13 * 1024 * 1024;
/**
 * Most fields and array items a body may hold, in all and at every depth (counted as
 * containers plus commas). Every legal body holds a few dozen at most; the bound keeps the
 * cost of parsing and validating any body within a few tens of milliseconds.
 */
export const MAX_BODY_ITEMS = 1024;
/** Deepest nesting of objects and arrays in a body. */
export const MAX_BODY_DEPTH = 32;
/** Most bytes of a body outside its strings (numbers, literals, punctuation; a whitespace run counts one). */
export const MAX_BODY_STRUCTURE_BYTES = 64 * 1024;
/** Longest and default recv wait, in milliseconds. */
export const MAX_WAIT_MS = 25_000;
/**
 * Longest a waiting MCP tool call (recv, status) holds its answer by default, whatever wait
 * it asked for (the relay's MCP_MAX_WAIT_MS). Proxies that buffer answers and cut silent
 * requests make a longer wait hang until the MCP client gives up (docs/mcp.md, "Behind a
 * proxy"); held calls also send a keep-alive every MCP_KEEPALIVE_MS, below common idle cuts.
 */
export const MCP_MAX_WAIT_MS = 10_000;
/**
 * The recv and status wait to start with on a path not tested yet (the recipe, the skill):
 * below the 10 s at which the strictest common proxies and gateways cut a request, with 2 s
 * to spare for connecting and the proxy's own clock. Longer only once the self-test shows the
 * path holds a longer answer (GET /v1/selftest?wait=25000 answers 200, not an error).
 */
export const FIRST_WAIT_MS = 8_000;
/**
 * Waiting recvs and statuses one seat holds on one relay node by default (the relay's
 * MAX_WAITERS_PER_SEAT): one more answers the seat's oldest at once, as if its wait ran out.
 */
export const WAITERS_PER_SEAT = 4;
/** How often a held MCP answer sends bytes (an SSE comment) so a proxy never sees it idle. */
export const MCP_KEEPALIVE_MS = 4_000;
/** idempotency_key: 1 to 128 visible ASCII characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 128;
/** Most ids one ack call may list. */
export const MAX_ACK_IDS = 64;
/** A seat counts as active for this long after its last call. */
export const PEER_ACTIVE_WINDOW_MS = 60_000;
/** The User-Agent product every duet client sends. */
export const USER_AGENT = "duet/0.1";
/** Version of the machine-readable description. */
export const API_VERSION = "1.0.0";
/** The self-test's stream (GET /v1/selftest?mode=stream): this many `tick` events, one every SELFTEST_TICK_MS. */
export const SELFTEST_TICKS = 5;
export const SELFTEST_TICK_MS = 1000;
