// Answers that many calls share, rendered once. The waiting recvs of one seat woken by one
// send share one read (realtime/long-polls.ts) and so one answer body: a 2 MiB text of
// control characters is 12.6 MB of JSON, and rendering it once per waiter held the event
// loop, and the memory, that many times over. Small answers are rendered as before.

/** Below this many characters of JSON an answer is not kept (rendering it again costs little). */
const LARGE = 64 * 1024;

const buffers = new WeakMap<object, Buffer>();
const texts = new WeakMap<object, string>();

/** The JSON of `body` as bytes (REST), kept with the body while it is large and in use. */
export function renderedJson(body: object): Buffer | string {
  const kept = buffers.get(body);
  if (kept) return kept;
  const json = JSON.stringify(body);
  if (json.length < LARGE) return json;
  const bytes = Buffer.from(json);
  buffers.set(body, bytes);
  return bytes;
}

/** The JSON of `body` as text (an MCP tool's text content), kept the same way. */
export function renderedText(body: object): string {
  const kept = texts.get(body);
  if (kept !== undefined) return kept;
  const json = JSON.stringify(body);
  if (json.length >= LARGE) texts.set(body, json);
  return json;
}
