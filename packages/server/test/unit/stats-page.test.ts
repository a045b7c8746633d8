// /v1/stats for a browser while the store does not answer: a 503 page that keeps reloading
// itself (the operator watching it sees the outage and its end), while machines keep the
// JSON error of every endpoint.
import request from "supertest";
import { createMetricsServer } from "../../src/metrics-listener";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { apiError } from "../../src/errors";
import { createLogger } from "../../src/logger";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

const BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

class UnreachableStore extends MemoryRoomStore {
  override async getStats(): Promise<never> {
    throw apiError("unavailable");
  }
}

const app = createApp({
  config: loadConfig({ STATS_CACHE_MS: "0" }),
  store: new UnreachableStore({ idleMs: 60_000, maxMs: 60_000 }),
  logger: createLogger("silent"),
  processMetrics: false,
});

it("a browser gets a 503 page that says the store does not answer and reloads itself", async () => {
  const page = await request(app).get("/v1/stats").set("accept", BROWSER);
  expect(page.status).toBe(503);
  expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
  expect(page.headers["retry-after"]).toBe("10");
  expect(page.text).toContain('<meta http-equiv="refresh" content="10">');
  expect(page.text).toContain("store does not answer");
  const metrics = await request(createMetricsServer(app.locals.metrics.registry, 0)).get("/metrics");
  expect(metrics.text).toContain('duet_errors_total{code="unavailable"} 1');
});

it("a machine gets the JSON 503 as from every endpoint", async () => {
  const reply = await request(app).get("/v1/stats");
  expect(reply.status).toBe(503);
  expect(reply.body).toEqual({ error: "unavailable", message: expect.any(String) });
});
