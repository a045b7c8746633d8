// Loads the Lua scripts (one file per atomic operation) and registers them with ioredis,
// which handles EVALSHA, NOSCRIPT reloads and cluster routing.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Cluster, Redis, Result } from "ioredis";

const LUA_DIR = join(__dirname, "lua");

const expandIncludes = (source: string): string =>
  source.replace(/^--!include (\S+)$/gm, (_line, name: string) =>
    expandIncludes(readFileSync(join(LUA_DIR, "includes", name), "utf8")),
  );

/** A script's source with its `--!include name.lua` lines replaced by includes/name.lua (which may include others). */
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

declare module "ioredis" {
  interface RedisCommander<Context> {
    duetOpen(...keysThenArgs: Arg[]): Result<number, Context>;
    duetJoin(...keysThenArgs: Arg[]): Result<number | NamedReply, Context>;
    duetSend(...keysThenArgs: Arg[]): Result<number | NamedReply, Context>;
    duetRecv(...keysThenArgs: Arg[]): Result<number | NamedReply, Context>;
    duetAck(...keysThenArgs: Arg[]): Result<number, Context>;
    duetStatus(...keysThenArgs: Arg[]): Result<number | NamedReply, Context>;
    duetClose(...keysThenArgs: Arg[]): Result<number, Context>;
    duetEnding(...keysThenArgs: Arg[]): Result<number | NamedReply, Context>;
    duetClaim(...keysThenArgs: Arg[]): Result<[number, number?], Context>;
    duetCountHits(...keysThenArgs: Arg[]): Result<number[], Context>;
  }
}

const SCRIPTS = {
  duetOpen: { file: "open-8.lua", numberOfKeys: 8 },
  duetJoin: { file: "join-8.lua", numberOfKeys: 8 },
  duetSend: { file: "send-8.lua", numberOfKeys: 8 },
  duetRecv: { file: "recv-7.lua", numberOfKeys: 7 },
  duetAck: { file: "ack-7.lua", numberOfKeys: 7 },
  duetStatus: { file: "status-7.lua", numberOfKeys: 7 },
  duetClose: { file: "close-8.lua", numberOfKeys: 8 },
  duetEnding: { file: "ending-1.lua", numberOfKeys: 1 },
  duetClaim: { file: "claim-1.lua", numberOfKeys: 1 },
  duetCountHits: { file: "count-hits-1.lua", numberOfKeys: 1 },
} as const;

export type ScriptName = keyof typeof SCRIPTS;

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
    source = { lua, sha: createHash("sha1").update(lua).digest("hex"), numberOfKeys: SCRIPTS[name].numberOfKeys };
    sources.set(name, source);
  }
  return source;
}

export function defineScripts(redis: Redis | Cluster): void {
  for (const [name, { file, numberOfKeys }] of Object.entries(SCRIPTS)) {
    redis.defineCommand(name, { numberOfKeys, lua: loadLua(file) });
  }
}
