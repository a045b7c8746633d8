// The Grafana dashboard in infra/grafana plots only series the relay really exports.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ANSWER_TIME_PATHS } from "@duet/protocol/endpoint-docs";
import request from "supertest";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createMetricsServer } from "../../src/metrics-listener";
import { knownRoutes } from "../../src/http/known-routes";
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
  const exported = (await request(createMetricsServer(app.locals.metrics.registry)).get("/metrics")).text;
  const names = new Set([...exported.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!));
  expect(queried.size).toBeGreaterThan(8);
  for (const series of queried) expect({ series, exported: names.has(series) }).toEqual({ series, exported: true });
});

describe("the dashboard answers an operator's questions", () => {
  const dashboard = JSON.parse(readFileSync(join(__dirname, "../../../../infra/grafana/duet-dashboard.json"), "utf8"));
  const panels: { type: string; title: string; description?: string; targets?: { expr: string }[] }[] =
    dashboard.panels.filter((p: { type: string }) => p.type !== "row");
  const exprs = (p: (typeof panels)[number]) => (p.targets ?? []).map((t) => t.expr);
  const all = panels.flatMap(exprs);

  it("every panel says what it shows, and plots rates or counts per interval, never both", () => {
    for (const p of panels) {
      expect({ panel: p.title, described: (p.description ?? "").length > 20 }).toEqual({
        panel: p.title,
        described: true,
      });
      const kinds = new Set(exprs(p).flatMap((e) => [...e.matchAll(/\b(rate|increase)\(/g)].map((m) => m[1])));
      expect({ panel: p.title, kinds: kinds.size <= 1 }).toEqual({ panel: p.title, kinds: true });
    }
  });

  it("shows scrape health, open streams, CPU, file descriptors and the store's gauges", () => {
    for (const series of [
      /\bup\{/,
      /duet_streams_open/,
      /duet_process_cpu_seconds_total/,
      /duet_process_open_fds/,
      /duet_store_rooms_open/,
    ]) {
      expect({ series: String(series), shown: all.some((e) => series.test(e)) }).toEqual({
        series: String(series),
        shown: true,
      });
    }
  });

  it("answer times leave out the calls that wait, and traffic leaves out scrapes and probes", () => {
    // The answer-time panels select by label, not by a list of operations: of every route the
    // app answers 200 on, their matchers keep exactly the room calls that never wait.
    const app = createApp({
      config: loadConfig({}),
      store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
      logger: createLogger("silent"),
    });
    const answered = knownRoutes(app).filter((r) => r.statuses.includes(200));
    const durations = all.filter((x) => x.includes("duet_http_request_duration_seconds"));
    expect(durations.length).toBe(2);
    for (const e of durations) {
      const selector = /duet_http_request_duration_seconds_bucket\{([^}]*)\}/.exec(e)![1]!;
      const matchers = [...selector.matchAll(/(\w+)(=~|!~|!=|=)"([^"]*)"/g)].map(([, label, op, value]) => ({
        label: label!,
        op: op!,
        value: value!,
      }));
      const selects = (labels: Record<string, string>) =>
        matchers.every(({ label, op, value }) => {
          const actual = labels[label];
          if (actual === undefined) return true; // job: the scrape's, not the relay's
          const matches = op.includes("~") ? new RegExp(`^(?:${value})$`).test(actual) : actual === value;
          return op.startsWith("!") ? !matches : matches;
        });
      const plotted = answered
        .filter((r) => selects({ route: r.route, method: r.method, status: "200" }))
        .map((r) => r.route);
      expect(plotted.sort()).toEqual([...ANSWER_TIME_PATHS].sort());
      // No list of operations to keep in step: a new call that never waits shows by itself.
      expect(e).not.toMatch(/\/v1\/(open|send|recv|status|stream)/);
    }
    for (const e of all.filter((x) => /rate\(duet_http_requests_total/.test(x))) {
      expect(e).toContain('route!~"/metrics|/healthz|/readyz"');
    }
  });
});
