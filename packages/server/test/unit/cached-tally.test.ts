// The tally behind /v1/stats is read from the store at most once per interval, however
// many requests ask.
import request from "supertest";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

it("serves many /v1/stats requests from one store read per interval", async () => {
  const store = new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 });
  let reads = 0;
  const getStats = store.getStats.bind(store);
  store.getStats = () => {
    reads++;
    return getStats();
  };
  const app = createApp({
    config: loadConfig({ STATS_CACHE_MS: "60000", RATE_LIMIT_REQUESTS: "0" }),
    store,
    logger: createLogger("silent"),
    processMetrics: false,
  });
  const replies = await Promise.all(Array.from({ length: 20 }, () => request(app).get("/v1/stats")));
  for (const reply of replies) expect(reply.status).toBe(200);
  await request(app).get("/v1/stats");
  expect(reads).toBe(1);
});
