// The Grafana dashboard in infra/grafana plots only series the relay really exports.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

it("every duet_* series the dashboard queries exists in /metrics", async () => {
  const dashboard = readFileSync(join(__dirname, "../../../../infra/grafana/duet-dashboard.json"), "utf8");
  const queried = new Set(
    [...dashboard.matchAll(/\b(duet_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, "")),
  );
  const app = createApp({
    config: loadConfig({}),
    store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
    logger: createLogger("silent"),
  });
  const exported = (await request(app).get("/metrics")).text;
  const names = new Set([...exported.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!));
  expect(queried.size).toBeGreaterThan(8);
  for (const series of queried) expect({ series, exported: names.has(series) }).toEqual({ series, exported: true });
});
