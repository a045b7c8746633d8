// The storage format kept in Redis (src/store/redis/format-version.ts, docs/redis.md §6),
// against a real redis-server of its own: the first node on an empty prefix records the
// format it writes, a node on the same format starts, and a node that finds another format
// refuses to start, with a message that says what it found and what to do, and changes
// nothing.
import { Writable } from "node:stream";
import { Redis } from "ioredis";
import { spawnRedis, type SpawnedRedis } from "@duet/testkit";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { startRelay } from "../../src/relay";
import { STORAGE_FORMAT, StorageFormatError, ensureStorageFormat } from "../../src/store/redis/format-version";

let redis: SpawnedRedis;
let admin: Redis;
const clients: Redis[] = [];
let prefixes = 0;
const freshPrefix = () => `format-test-${process.pid}-${prefixes++}:`;

const connect = () => {
  // As the relay connects: no offline queue, so ensureStorageFormat must wait for ready.
  const client = new Redis(redis.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
  client.on("error", () => undefined);
  clients.push(client);
  return client;
};

const relayOn = (prefix: string) => {
  const config = loadConfig({
    HOST: "127.0.0.1",
    PORT: "0",
    METRICS_PORT: "0", // never the default 9464: another test's relay may hold it
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: prefix,
    LOG_LEVEL: "silent",
  });
  const sink = new Writable({ write: (_chunk, _enc, done) => done() });
  return startRelay(config, createLogger(config.logLevel, sink));
};

beforeAll(async () => {
  redis = await spawnRedis();
  admin = new Redis(redis.url);
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

it("the first node on an empty prefix records the format it writes, with no expiry", async () => {
  const prefix = freshPrefix();
  await ensureStorageFormat(connect(), prefix);
  expect(await admin.get(`${prefix}format`)).toBe(String(STORAGE_FORMAT));
  expect(await admin.pttl(`${prefix}format`)).toBe(-1);
});

it("a node on a prefix of its own format starts, and leaves the record as it was", async () => {
  const prefix = freshPrefix();
  await admin.set(`${prefix}format`, String(STORAGE_FORMAT));
  await expect(ensureStorageFormat(connect(), prefix)).resolves.toBeUndefined();
  expect(await admin.get(`${prefix}format`)).toBe(String(STORAGE_FORMAT));
});

it.each([String(STORAGE_FORMAT + 1), "0", "not-a-number"])(
  "a node that finds format %s refuses, says what it found and where, and changes nothing",
  async (found) => {
    const prefix = freshPrefix();
    await admin.set(`${prefix}format`, found);
    const check = ensureStorageFormat(connect(), prefix);
    await expect(check).rejects.toBeInstanceOf(StorageFormatError);
    await expect(check).rejects.toThrow(
      `Redis holds storage format "${found}" at ${prefix}format; this relay reads and writes format ${STORAGE_FORMAT} only.`,
    );
    await expect(check).rejects.toThrow(/docs\/redis\.md §6/);
    expect(await admin.get(`${prefix}format`)).toBe(found);
  },
);

it("a full Redis (maxmemory, noeviction) does not stop a node whose format is recorded", async () => {
  const prefix = freshPrefix();
  await admin.set(`${prefix}format`, String(STORAGE_FORMAT));
  await admin.config("SET", "maxmemory-policy", "noeviction");
  await admin.config("SET", "maxmemory", "1");
  try {
    await expect(admin.set(`${prefix}other`, "x")).rejects.toThrow(/^OOM/);
    await expect(ensureStorageFormat(connect(), prefix)).resolves.toBeUndefined();
  } finally {
    await admin.config("SET", "maxmemory", "0");
  }
});

it("prefixes are independent: each records its own format", async () => {
  const [first, second] = [freshPrefix(), freshPrefix()];
  await admin.set(`${first}format`, String(STORAGE_FORMAT + 1));
  await ensureStorageFormat(connect(), second);
  expect(await admin.get(`${second}format`)).toBe(String(STORAGE_FORMAT));
  expect(await admin.get(`${first}format`)).toBe(String(STORAGE_FORMAT + 1));
});

it("a relay serves on a prefix of its format, and on another one is refused (never ready)", async () => {
  const prefix = freshPrefix();
  const relay = await relayOn(prefix);
  try {
    await relay.storageFormat;
    expect(await admin.get(`${prefix}format`)).toBe(String(STORAGE_FORMAT));
    expect((await fetch(`${relay.url}/readyz`)).status).toBe(200);
  } finally {
    await relay.shutdown();
  }

  const other = freshPrefix();
  await admin.set(`${other}format`, String(STORAGE_FORMAT + 1));
  const refused = await relayOn(other);
  try {
    await expect(refused.storageFormat).rejects.toBeInstanceOf(StorageFormatError);
    expect((await fetch(`${refused.url}/readyz`)).status).not.toBe(200);
  } finally {
    await refused.shutdown();
  }
  // It wrote nothing under the prefix it refused.
  expect(await admin.keys(`${other}*`)).toEqual([`${other}format`]);
});
