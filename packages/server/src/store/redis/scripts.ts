// Loads the Lua scripts (one file per atomic operation) and registers them with ioredis,
// which handles EVALSHA, NOSCRIPT reloads and cluster routing.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Cluster, Redis, Result } from "ioredis";

const LUA_DIR = join(__dirname, "lua");

/** A script's source with its `--!include name.lua` lines replaced by includes/name.lua. */
export function loadLua(file: string): string {
  return readFileSync(join(LUA_DIR, file), "utf8").replace(/^--!include (\S+)$/gm, (_line, name: string) =>
    readFileSync(join(LUA_DIR, "includes", name), "utf8"),
  );
}

type Arg = string | number;

declare module "ioredis" {
  interface RedisCommander<Context> {
    duetOpen(room: string, tally: string, tokenHash: string, idleMs: number, maxMs: number): Result<number, Context>;
    duetJoin(...keysThenArgs: Arg[]): Result<number, Context>;
    duetSend(...keysThenArgs: Arg[]): Result<[number, string?, number?], Context>;
    duetRecv(...keysThenArgs: Arg[]): Result<(string | number)[], Context>;
    duetAck(...keysThenArgs: Arg[]): Result<number, Context>;
    duetStatus(...keysThenArgs: Arg[]): Result<(string | number)[], Context>;
    duetClose(...keysThenArgs: Arg[]): Result<number, Context>;
  }
}

const SCRIPTS = {
  duetOpen: { file: "open-2.lua", numberOfKeys: 2 },
  duetJoin: { file: "join-6.lua", numberOfKeys: 6 },
  duetSend: { file: "send-6.lua", numberOfKeys: 6 },
  duetRecv: { file: "recv-5.lua", numberOfKeys: 5 },
  duetAck: { file: "ack-5.lua", numberOfKeys: 5 },
  duetStatus: { file: "status-5.lua", numberOfKeys: 5 },
  duetClose: { file: "close-5.lua", numberOfKeys: 5 },
} as const;

export function defineScripts(redis: Redis | Cluster): void {
  for (const [name, { file, numberOfKeys }] of Object.entries(SCRIPTS)) {
    redis.defineCommand(name, { numberOfKeys, lua: loadLua(file) });
  }
}
