import { ERRORS } from "@duet/protocol";
import { ownRedis } from "../support/own-redis";

const own = ownRedis();

const bare404 = { error: "not_found", message: ERRORS.not_found.message };
const roomKeys = async (code: string) => own.admin.keys(`${own.target.config.redis!.keyPrefix}*${code}*`);

it("a room without an ending record works as any other and ends with the bare 404", async () => {
  const { client } = own.target;
  const room = await client.pairedRoom();
  const record = (await roomKeys(room.code)).find((key) => key.endsWith(":ended"))!;
  expect(await own.admin.del(record)).toBe(1);
  expect((await client.send(room.code, room.a, "still works")).status).toBe(200);
  expect((await client.recv(room.code, room.b, 0)).body.messages).toHaveLength(1);
  // No script recreates a record it did not write at open.
  expect(await own.admin.exists(record)).toBe(0);
  expect((await client.close(room.code, room.a, true)).status).toBe(200);
  expect(await roomKeys(room.code)).toEqual([]);
  expect((await client.status(room.code, room.b)).body).toEqual(bare404);
});

it("a room whose keys vanished before their expiry is not reported as expired", async () => {
  const { client } = own.target;
  const room = await client.pairedRoom();
  const keys = await roomKeys(room.code);
  await own.admin.del(...keys.filter((key) => !key.endsWith(":ended")));
  expect((await client.status(room.code, room.a)).body).toEqual(bare404);
  expect((await client.recv(room.code, room.b, 0)).body).toEqual(bare404);
});
