// The Redis ending record (docs/room-endings.md) when the room's keys did not end the way
// the relay's own scripts end them: a room that has no ending record (ROOM_ENDING_KEEP_SECONDS=0 writes none),
// and a room whose keys vanished before their expiry. In both, the relay must not invent
// a reason: its seats get the bare 404.
import { Redis } from "ioredis";
import { ERRORS } from "@duet/protocol";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import { startTarget, type RelayTarget } from "../support/targets";

let redis: SpawnedRedis;
let admin: Redis;
let target: RelayTarget;

beforeAll(async () => {
  redis = await spawnRedis();
  admin = new Redis(redis.url);
  target = await startTarget("redis", { REDIS_URL: redis.url });
});
afterAll(async () => {
  await target?.close();
  admin?.disconnect();
  await redis?.stop();
});

const bare404 = { error: "not_found", message: ERRORS.not_found.message };
const roomKeys = async (code: string) => admin.keys(`${target.config.redis!.keyPrefix}*${code}*`);

it("a room without an ending record works as any other and ends with the bare 404", async () => {
  const { client } = target;
  const room = await client.pairedRoom();
  const record = (await roomKeys(room.code)).find((key) => key.endsWith(":ended"))!;
  expect(await admin.del(record)).toBe(1);
  expect((await client.send(room.code, room.a, "still works")).status).toBe(200);
  expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(1);
  // No script recreates a record it did not write at open.
  expect(await admin.exists(record)).toBe(0);
  expect((await client.close(room.code, room.a, true)).status).toBe(200);
  expect(await roomKeys(room.code)).toEqual([]);
  expect((await client.status(room.code, room.b)).body).toEqual(bare404);
});

it("a room whose keys vanished before their expiry is not reported as expired", async () => {
  const { client } = target;
  const room = await client.pairedRoom();
  const keys = await roomKeys(room.code);
  await admin.del(...keys.filter((key) => !key.endsWith(":ended")));
  expect((await client.status(room.code, room.a)).body).toEqual(bare404);
  expect((await client.recv(room.code, room.b, 0)).body).toEqual(bare404);
});
