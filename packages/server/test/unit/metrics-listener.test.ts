// The metrics listener's render cache (metrics-listener.ts): at most one render per period,
// shared by the scrapes that arrive meanwhile; a failed render is not kept.
import { Agent, createServer, get } from "node:http";
import type { AddressInfo } from "node:net";
import { CachedRender, metricsHandler } from "../../src/metrics-listener";

function counting(fail = () => false) {
  let renders = 0;
  return {
    renders: () => renders,
    registry: {
      metrics: async () => {
        renders++;
        if (fail()) throw new Error("render failed");
        return `render ${renders}`;
      },
    },
  };
}

it("renders once per period: concurrent and later scrapes within it share one render", async () => {
  let now = 10_000;
  const source = counting();
  const cache = new CachedRender(source.registry, 1000, () => now);
  const texts = await Promise.all([cache.read(), cache.read(), cache.read()]);
  expect(texts).toEqual(["render 1", "render 1", "render 1"]);
  now += 999;
  expect(await cache.read()).toBe("render 1");
  now += 1;
  expect(await cache.read()).toBe("render 2");
  expect(source.renders()).toBe(2);
});

it("a clock that steps back renders again rather than serving a render from the future", async () => {
  let now = 10_000;
  const source = counting();
  const cache = new CachedRender(source.registry, 1000, () => now);
  await cache.read();
  now -= 5000;
  expect(await cache.read()).toBe("render 2");
});

it("a failed render is not served to the next scrape", async () => {
  let failing = true;
  const source = counting(() => failing);
  const cache = new CachedRender(source.registry, 1000, () => 0);
  await expect(cache.read()).rejects.toThrow("render failed");
  failing = false;
  expect(await cache.read()).toBe("render 2");
});

it("a period of 0 renders every scrape", async () => {
  const source = counting();
  const cache = new CachedRender(source.registry, 0, () => 0);
  await cache.read();
  await cache.read();
  expect(source.renders()).toBe(2);
});

it("under a flood of 16 keep-alive connections: one render per period, and each connection answered once a period (never the same render twice)", async () => {
  const source = counting();
  const periodMs = 100;
  const cache = new CachedRender(source.registry, periodMs);
  const registry = { ...source.registry, contentType: "text/plain; version=0.0.4; charset=utf-8" };
  // Paced as the listener paces at this period (min(METRICS_CACHE_MS, 1 s)).
  const server = createServer(metricsHandler(registry as never, cache, periodMs));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  // One agent of one socket per connection: its answers are that connection's.
  const agents = Array.from({ length: 16 }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
  const scrape = (agent: Agent) =>
    new Promise<string>((resolve, reject) => {
      get({ host: "127.0.0.1", port, path: "/metrics", agent }, (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (d: string) => (text += d));
        res.on("end", () => resolve(text));
      }).on("error", reject);
    });
  const started = performance.now();
  try {
    // Each connection asks back to back, 5 times: a flood, bounded by count rather than time.
    const perConnection = await Promise.all(
      agents.map(async (agent) => {
        const texts: string[] = [];
        for (let i = 0; i < 5; i++) texts.push(await scrape(agent));
        return texts;
      }),
    );
    const elapsed = performance.now() - started;
    for (const texts of perConnection) expect(new Set(texts).size).toBe(texts.length);
    // At most one render per period of the flood (and the first).
    expect(cache.renders).toBe(source.renders());
    expect(source.renders()).toBeLessThanOrEqual(Math.floor(elapsed / periodMs) + 1);
    expect(source.renders()).toBeGreaterThanOrEqual(5);
  } finally {
    for (const agent of agents) agent.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});
