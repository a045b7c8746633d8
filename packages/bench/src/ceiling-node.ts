// The stack's ceilings: the same room calls served by a bare node:http server or a bare
// Express server doing the same Redis operations as duet (the real Lua scripts through
// defineScripts, the real key names, the same ref-counted SSUBSCRIBE wake-ups and re-read
// after a wake) and nothing else: no validation, no token hashing, no rate limits, no
// helmet, no logging. Mode "wake" is the bare wake baseline: a request held until an
// SPUBLISH on one channel the process subscribed to at start.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import express from "express";
import { Redis } from "ioredis";
import { MAX_PENDING_BYTES, MAX_PENDING_MESSAGES } from "@duet/protocol";
import { defineScripts, fieldsOf } from "@duet/server/dist/store/redis/scripts.js";
import { RedisKeys } from "@duet/server/dist/store/redis/keys.js";
import { refused } from "@duet/server/dist/store/redis/redis-store.js";
import { inboxOfReply } from "@duet/server/dist/store/scripted-store.js";
import { RedisWakeupBus } from "@duet/server/dist/realtime/redis-wakeups.js";
import { mintRoomCode, mintSeatToken } from "@duet/server/dist/store/credentials.js";
import type { WakeEvent } from "@duet/server/dist/store/room-store.js";
import { connectionCount, reportMetrics } from "./node-metrics.js";

const mode = process.argv[2] as "http" | "express" | "wake";
const redisUrl = process.env.REDIS_URL!;
const prefix = process.env.REDIS_KEY_PREFIX ?? "ceiling:";
const IDLE_MS = 1_800_000;
const ENDING_KEEP_MS = 600_000; // ROOM_ENDING_KEEP_SECONDS default
const RECHECK_MS = 150_000; // duet's default WAKE_RECHECK_SECONDS (a 25 s recv never reaches it; docs/streams.md)
export const WAKE_CHANNEL = "bench:wake";

// The same connection settings as duet's command and subscriber clients where they matter.
const redis = new Redis(redisUrl, {
  connectionName: "ceiling",
  enableAutoPipelining: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
});
const subscriber = new Redis(redisUrl, { connectionName: "ceiling", enableOfflineQueue: false });
defineScripts(redis);
const keys = new RedisKeys(prefix);
const wakeups = new RedisWakeupBus(subscriber, (code) => keys.wakeChannel(code));
let waiting = 0;

type Json = Record<string, unknown>;
class Failure extends Error {
  constructor(readonly status: number) {
    super(`status ${status}`);
  }
}
// A script's refusal answered with the status duet answers it with.
const failure = (status: number) => new Failure((refused(status) as Error & { status?: number }).status ?? 500);
const check = (status: unknown) => {
  if (typeof status === "number" && status < 0) throw failure(status);
};

// The token travels as is and stands in for its hash: no SHA-256, no auth beyond the
// script's own comparison.
async function openRoom(): Promise<Json> {
  for (;;) {
    const code = mintRoomCode();
    const token = mintSeatToken();
    // The relay's defaults: the ending record kept 10 minutes, a plain (not encrypted) room.
    const expires = await redis.duetOpen(
      ...keys.room(code),
      keys.tallyFor(code),
      token,
      IDLE_MS,
      IDLE_MS,
      ENDING_KEEP_MS,
      "0",
    );
    if (expires >= 0) return { code, seat: "a", token, expires_in: Math.ceil(expires / 1000) };
  }
}

async function joinRoom(code: string): Promise<Json> {
  const token = mintSeatToken();
  const reply = await redis.duetJoin(...keys.room(code), keys.tallyFor(code), token, IDLE_MS, keys.wakeChannel(code));
  if (typeof reply === "number") throw failure(reply);
  return { code, seat: "b", token, expires_in: Math.ceil(Number(fieldsOf(reply).expires_in) / 1000) };
}

async function send(code: string, token: string, text: string): Promise<Json> {
  const reply = await redis.duetSend(
    ...keys.room(code),
    keys.tallyFor(code),
    token,
    IDLE_MS,
    text,
    "",
    "",
    MAX_PENDING_MESSAGES,
    MAX_PENDING_BYTES,
    keys.wakeChannel(code),
    "0",
  );
  if (typeof reply === "number") throw failure(reply);
  return { id: fieldsOf(reply).id };
}

async function read(code: string, token: string, touch: boolean) {
  const reply = await redis.duetRecv(...keys.room(code), token, IDLE_MS, touch ? "1" : "0");
  if (typeof reply === "number") throw failure(reply);
  return inboxOfReply(reply);
}

// duet's long-poll, stripped to its Redis operations: watch, read, wait, re-read.
async function recv(code: string, token: string, waitMs: number, aborted: () => boolean): Promise<Json | undefined> {
  if (waitMs === 0) return { messages: (await read(code, token, true)).messages };
  const deadline = Date.now() + waitMs;
  let seat: string | undefined;
  let woken = false;
  let wake: (() => void) | undefined;
  const onEvent = (event: WakeEvent) => {
    if (event === "closed" || event === "resync" || seat === undefined || event === seat) {
      woken = true;
      wake?.();
    }
  };
  const stop = await wakeups.watch(code, onEvent);
  waiting++;
  try {
    let snapshot = await read(code, token, true);
    seat = snapshot.seat;
    for (;;) {
      if (snapshot.messages.length > 0 || aborted()) return { messages: snapshot.messages };
      const remaining = deadline - Date.now();
      if (remaining <= 0) return { messages: [] };
      if (!woken) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(remaining, RECHECK_MS));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      woken = false;
      wake = undefined;
      if (aborted()) return undefined;
      snapshot = await read(code, token, false);
    }
  } finally {
    waiting--;
    stop();
  }
}

async function ack(code: string, token: string, ids: string[]): Promise<Json> {
  const acked = await redis.duetAck(...keys.room(code), token, IDLE_MS, keys.wakeChannel(code), ...ids);
  check(acked);
  return { ok: true, acked };
}

const bearer = (header: string | undefined) => (header ?? "").slice(7);

/** The five room calls, shared by both ceilings: (path, body or query, token) to an answer. */
async function answer(
  method: string,
  path: string,
  input: Json,
  token: string,
  aborted: () => boolean,
): Promise<Json | undefined> {
  if (method === "POST" && path === "/v1/send") return send(String(input.code), token, String(input.text));
  if (method === "GET" && path === "/v1/recv")
    return recv(String(input.code), token, input.wait === undefined ? 25_000 : Number(input.wait), aborted);
  if (method === "POST" && path === "/v1/ack") return ack(String(input.code), token, input.ids as string[]);
  if (method === "POST" && path === "/v1/open") return openRoom();
  if (method === "POST" && path === "/v1/join") return joinRoom(String(input.code));
  throw new Failure(404);
}

function startHttp() {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const url = req.url ?? "/";
      const q = url.indexOf("?");
      const path = q < 0 ? url : url.slice(0, q);
      let input: Json;
      if (req.method === "GET") input = Object.fromEntries(new URLSearchParams(q < 0 ? "" : url.slice(q + 1)));
      else input = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as Json) : {};
      answer(req.method ?? "GET", path, input, bearer(req.headers.authorization), () => res.destroyed).then(
        (body) => {
          if (body === undefined || res.destroyed) return;
          const json = JSON.stringify(body);
          res.writeHead(200, {
            "content-type": "application/json; charset=utf-8",
            "content-length": Buffer.byteLength(json),
          });
          res.end(json);
        },
        (error: unknown) => {
          res.writeHead(error instanceof Failure ? error.status : 500).end();
        },
      );
    });
  });
}

function startExpress() {
  const app = express();
  // As lean as Express gets while still doing its job: no ETag hashing, no x-powered-by.
  app.disable("etag");
  app.disable("x-powered-by");
  app.use(express.json({ type: () => true }));
  const handle = (req: express.Request, res: express.Response, next: express.NextFunction) => {
    const input = (req.method === "GET" ? req.query : req.body) as Json;
    answer(req.method, req.path, input ?? {}, bearer(req.get("authorization")), () => res.destroyed).then((body) => {
      if (body !== undefined && !res.destroyed) res.json(body);
    }, next);
  };
  app.post(["/v1/open", "/v1/join", "/v1/send", "/v1/ack"], handle);
  app.get("/v1/recv", handle);
  app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(error instanceof Failure ? error.status : 500).end();
  });
  return createServer(app);
}

// The wake baseline: GET /wait?id=N is held until an SPUBLISH of N on the one channel;
// POST /pub?id=N publishes it (so the trigger can cross a process like duet's send does).
async function startWake() {
  const held = new Map<string, ServerResponse>();
  subscriber.on("smessage", (_channel: string, id: string) => {
    const res = held.get(id);
    if (!res) return;
    held.delete(id);
    res.writeHead(200, { "content-type": "application/json", "content-length": 2 }).end("{}");
  });
  await subscriber.ssubscribe(WAKE_CHANNEL);
  return createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const id = url.searchParams.get("id") ?? "";
    req.resume();
    if (url.pathname === "/wait") {
      held.set(id, res);
      waiting = held.size;
      res.once("close", () => {
        held.delete(id);
        waiting = held.size;
      });
    } else {
      redis.spublish(WAKE_CHANNEL, id).then(
        () => res.writeHead(200, { "content-length": 2 }).end("{}"),
        () => res.writeHead(500).end(),
      );
    }
  });
}

async function main(): Promise<void> {
  // No offline queue (as in duet): both connections must be up before the first request.
  await Promise.all(
    [redis, subscriber].map((c) =>
      c.status === "ready" ? undefined : new Promise((resolve) => c.once("ready", resolve)),
    ),
  );
  const server = mode === "wake" ? await startWake() : mode === "express" ? startExpress() : startHttp();
  server.keepAliveTimeout = 65_000;
  server.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const { port } = server.address() as { port: number };
  reportMetrics(async () => ({ waiting, connections: await connectionCount(server) }));
  const stop = () => {
    server.closeAllConnections();
    server.close();
    redis.disconnect();
    subscriber.disconnect();
    process.exit(0);
  };
  process.on("message", (message: { type?: string }) => message?.type === "stop" && stop());
  process.on("disconnect", stop);
  process.send?.({ type: "ready", url: `http://127.0.0.1:${port}` });
}

main().catch((error) => {
  process.stderr.write(`ceiling-node ${mode}: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
