// Loads the Lua scripts (one file per atomic operation) and registers them with ioredis,
// which handles EVALSHA, NOSCRIPT reloads and cluster routing.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ClientContext, Cluster, Redis, Result } from "ioredis";

const LUA_DIR = join(__dirname, "lua");

const expandIncludes = (source: string): string =>
  source.replace(/^--!include (\S+)$/gm, (_line, name: string) =>
    expandIncludes(readFileSync(join(LUA_DIR, "includes", name), "utf8")),
  );

/** A script's source with its `--!include <name>.lua` lines replaced by includes/<name>.lua (which may include others). */
export function loadLua(file: string): string {
  return expandIncludes(readFileSync(join(LUA_DIR, file), "utf8"));
}

type Arg = string | number;

/**
 * A script's answer as named fields: a flat list of names and values, as the script writes
 * it ({'seat', seat, 'expires_in', ms, ...}). A refusal is a bare negative number instead.
 */
export type NamedReply = (string | number | NamedReply)[];

/** The fields of a named reply, by name (what a script returns, read without counting positions). */
export function fieldsOf(reply: NamedReply): Record<string, string | number | NamedReply> {
  const fields: Record<string, string | number | NamedReply> = {};
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = reply[i + 1]!;
  return fields;
}

/**
 * What a script declares once: its file (whose name ends in its key count, `open-8.lua`: the
 * first 8 arguments are keys, the rest ARGV), what it does atomically (the script table of
 * docs/redis.md §3 is generated from `does` by `pnpm docs:generate`), and the type of its
 * reply (`R`, a type only: every caller of the script gets it). `grows`: it adds rooms or
 * text, so the in-process store's byte budget (MEMORY_STORE_MAX_BYTES) checks it first.
 */
export interface ScriptSpec<R> {
  file: string;
  does: string;
  grows?: true;
  /** The key count, read from the file name. */
  numberOfKeys: number;
  /** Never set: carries the reply type R. */
  reply?: R;
}

function script<R>(spec: Pick<ScriptSpec<R>, "file" | "does" | "grows">): ScriptSpec<R> {
  const keys = /-(\d+)\.lua$/.exec(spec.file)?.[1];
  if (keys === undefined) throw new Error(`${spec.file}: a script's file name ends in its key count (open-8.lua)`);
  return { ...spec, numberOfKeys: Number(keys) };
}

/** Every script, its file and what it does (ScriptSpec), and its reply. */
export const SCRIPTS = {
  duetOpen: script<number>({
    file: "open-8.lua",
    grows: true,
    does: "create the room with seat `a` and its ending record, set their expiry, count a session and a live room; refuse a code in use or still remembered as ended",
  }),
  duetJoin: script<number | NamedReply>({
    file: "join-8.lua",
    does: "claim seat `b` (`GONE`, `FULL`), count a pairing, wake the opener's waiting status",
  }),
  duetSend: script<number | NamedReply>({
    file: "send-8.lua",
    grows: true,
    does: "idempotency check, mailbox check, the envelope check of an encrypted room, store, expiry, tally, and the `SPUBLISH` wake-up",
  }),
  duetRecv: script<number | NamedReply>({
    file: "recv-7.lua",
    does: "read the caller's pending messages (activity only on a recv's first read)",
  }),
  duetAck: script<number>({
    file: "ack-7.lua",
    does: "delete the listed messages of the caller's inbox, and publish the deleted ids to the sender (`read:…`)",
  }),
  duetStatus: script<number | NamedReply>({
    file: "status-7.lua",
    does: "the caller's view of the room (activity only on a status's first read)",
  }),
  duetClose: script<number>({
    file: "close-8.lua",
    does: "the unread check, record how the room ended, delete the room's keys, count a close, publish `closed`",
  }),
  duetClaim: script<[number, number?]>({
    file: "claim-1.lua",
    does: "count a room an address opens against `ROOMS_PER_IP` (429 `too_many_rooms`), dropping rooms past their hard cap and those the caller found gone; its own key, run just before `open`",
  }),
  duetLeaseTokens: script<number[]>({
    file: "lease-tokens-1.lua",
    does: "grant a node tokens from the window's per-IP request budgets, never more than is left, after charging the calls it admitted without one (or taking back the tokens a stopping node returns), for all the addresses it needs tokens for in one call; answer each grant and the budget taken (one limit across nodes with no round trip per call: [security](security.md#rate-limits))",
  }),
  duetEnding: script<number | NamedReply>({
    file: "ending-1.lua",
    does: "after `GONE`: how the room ended, for one of its seats, from its ending record ([room endings](room-endings.md#redis))",
  }),
};

export type ScriptName = keyof typeof SCRIPTS;
/** What a script answers, as SCRIPTS declares it. */
export type ScriptReply<N extends ScriptName> = (typeof SCRIPTS)[N] extends ScriptSpec<infer R> ? R : never;

/** The scripts as ioredis commands (defineScripts), each typed by its declared reply. */
type ScriptCommands<Context extends ClientContext> = {
  [N in ScriptName]: (...keysThenArgs: Arg[]) => Result<ScriptReply<N>, Context>;
};

declare module "ioredis" {
  interface RedisCommander<Context> extends ScriptCommands<Context> {}
}

/** docs/redis.md §3's script table, from SCRIPTS. */
export function scriptTable(): string {
  const rows = Object.values(SCRIPTS).map(({ file, does }) => `| \`${file.replace(/\.lua$/, "")}\` | ${does} |`);
  return ["| Script | Does, atomically |", "|---|---|", ...rows].join("\n");
}

export interface ScriptSource {
  lua: string;
  sha: string;
  numberOfKeys: number;
}

const sources = new Map<ScriptName, ScriptSource>();

/** A script's source and SHA-1, for callers that send EVALSHA/EVAL themselves (write-ack pipelines). */
export function scriptSource(name: ScriptName): ScriptSource {
  let source = sources.get(name);
  if (!source) {
    const lua = loadLua(SCRIPTS[name].file);
    const { numberOfKeys } = SCRIPTS[name];
    source = { lua, sha: createHash("sha1").update(lua).digest("hex"), numberOfKeys };
    sources.set(name, source);
  }
  return source;
}

export function defineScripts(redis: Redis | Cluster): void {
  for (const [name, { file, numberOfKeys }] of Object.entries(SCRIPTS)) {
    redis.defineCommand(name, { numberOfKeys, lua: loadLua(file) });
  }
}
