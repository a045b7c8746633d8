// Configuration: defaults as documented, and a bad value stops start-up naming the variable.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../../src/config";

describe("loadConfig", () => {
  it("has the documented defaults and no Redis", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      trustProxy: false,
      redis: undefined,
      roomIdleMs: 1_800_000,
      roomMaxMs: 1_800_000,
      userAgentPolicy: "denylist",
      rateLimit: { windowMs: 60_000, requestsPerWindow: 600, roomsPerWindow: 60 },
    });
  });

  it("reads Redis, proxies and lifetimes", () => {
    const config = loadConfig({ REDIS_URL: "redis://r:6379/2", TRUST_PROXY: "1", ROOM_IDLE_SECONDS: "5", PUBLIC_URL: "https://duet.example/" });
    expect(config.redis).toMatchObject({ url: "redis://r:6379/2", keyPrefix: "duet:" });
    expect(config.trustProxy).toBe(1);
    expect(config.roomIdleMs).toBe(5000);
    expect(config.publicUrl).toBe("https://duet.example");
    expect(loadConfig({ TRUST_PROXY: "10.0.0.0/8, 127.0.0.1" }).trustProxy).toEqual(["10.0.0.0/8", "127.0.0.1"]);
    expect(loadConfig({ REDIS_CLUSTER_NODES: "a:7000,b:7001" }).redis?.clusterNodes).toEqual([
      { host: "a", port: 7000 },
      { host: "b", port: 7001 },
    ]);
  });

  it.each([
    ["PORT", "eighty"],
    ["PORT", "70000"],
    ["ROOM_IDLE_SECONDS", "0"],
    ["UA_POLICY", "maybe"],
    ["REDIS_URL", "http://not-redis"],
    ["TRUST_PROXY", "true"],
    ["PUBLIC_URL", "not a url"],
    ["RATE_LIMIT_REQUESTS", "-1"],
    ["REDIS_CLUSTER_NODES", "no-port"],
  ])("refuses %s=%j naming the variable", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    try {
      loadConfig({ [name]: value });
    } catch (error) {
      expect((error as ConfigError).message).toContain(name);
    }
  });

  it("the built server exits at start-up with a message naming the bad variable", () => {
    const main = join(__dirname, "../../dist/main.js");
    const run = spawnSync(process.execPath, [main], { env: { PATH: process.env.PATH, PORT: "0", ROOM_MAX_SECONDS: "soon" }, encoding: "utf8", timeout: 10_000 });
    expect(run.status).toBe(78);
    expect(run.stderr).toContain("ROOM_MAX_SECONDS");
  });
});
