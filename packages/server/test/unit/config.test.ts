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
      metrics: { port: 9464, host: "127.0.0.1", cacheMs: 1000 },
      trustProxy: false,
      redis: undefined,
      roomIdleMs: 1_800_000,
      roomMaxMs: 1_800_000,
      userAgentPolicy: "denylist",
      rateLimit: { windowMs: 60_000, requestsPerWindow: 600, roomsPerWindow: 60 },
    });
  });

  it("reads the metrics listener: a port, 0 for a free one, or off", () => {
    expect(loadConfig({ METRICS_PORT: "0", METRICS_HOST: "0.0.0.0", METRICS_CACHE_MS: "0" }).metrics).toEqual({
      port: 0,
      host: "0.0.0.0",
      cacheMs: 0,
    });
    expect(loadConfig({ METRICS_PORT: "off" }).metrics).toBeUndefined();
  });

  it("reads Redis, proxies and lifetimes", () => {
    const config = loadConfig({
      REDIS_URL: "redis://r:6379/2",
      TRUST_PROXY: "1",
      ROOM_IDLE_SECONDS: "5",
      PUBLIC_URL: "https://duet.example/",
    });
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

  it("reads Sentinel, its NAT map and write-ack", () => {
    const config = loadConfig({
      REDIS_SENTINELS: "s1:26379, [::1]:26380",
      REDIS_SENTINEL_NAME: "duet",
      REDIS_SENTINEL_PASSWORD: "pw",
      REDIS_SENTINEL_TLS: "true",
      REDIS_SENTINEL_NAT_MAP: "10.0.0.1:6379=127.0.0.1:16379,10.0.0.2:6379=redis-b.example:6380",
      REDIS_WRITE_ACK_REPLICAS: "1",
      REDIS_WRITE_ACK_TIMEOUT_MS: "300",
    });
    expect(config.redis).toMatchObject({
      url: undefined,
      clusterNodes: undefined,
      sentinel: {
        sentinels: [
          { host: "s1", port: 26379 },
          { host: "::1", port: 26380 },
        ],
        name: "duet",
        password: "pw",
        tls: true,
        natMap: {
          "10.0.0.1:6379": { host: "127.0.0.1", port: 16379 },
          "10.0.0.2:6379": { host: "redis-b.example", port: 6380 },
        },
      },
      writeAckReplicas: 1,
      writeAckTimeoutMs: 300,
    });
    expect(loadConfig({ REDIS_URL: "redis://r:6379" }).redis).toMatchObject({
      writeAckReplicas: 0,
      writeAckTimeoutMs: 500,
    });
    expect(loadConfig({ REDIS_URL: "redis://r:6379", REDIS_WRITE_ACK_REPLICAS: "all" }).redis).toMatchObject({
      writeAckReplicas: "all",
    });
    expect(loadConfig({ REDIS_URL: "redis://r:6379", REDIS_WRITE_ACK_REPLICAS: " 2 " }).redis).toMatchObject({
      writeAckReplicas: 2,
    });
  });

  it.each([
    [{ REDIS_URL: "redis://r", REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "m" }, "REDIS_SENTINELS"],
    [
      { REDIS_CLUSTER_NODES: "a:1", REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "m" },
      "REDIS_CLUSTER_NODES and REDIS_SENTINELS",
    ],
    [{ REDIS_URL: "redis://r", REDIS_CLUSTER_NODES: "a:1" }, "REDIS_URL and REDIS_CLUSTER_NODES"],
    [{ REDIS_SENTINELS: "s:26379" }, "REDIS_SENTINEL_NAME"],
    [{ REDIS_SENTINEL_NAME: "m" }, "REDIS_SENTINEL_NAME"],
    [
      { REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "m", REDIS_SENTINEL_NAT_MAP: "10.0.0.1:6379" },
      "REDIS_SENTINEL_NAT_MAP",
    ],
    [{ REDIS_SENTINELS: "s:26379", REDIS_SENTINEL_NAME: "m", REDIS_SENTINEL_TLS: "yes" }, "REDIS_SENTINEL_TLS"],
    [{ REDIS_URL: "redis://r", REDIS_PASSWORD: "pw" }, "REDIS_PASSWORD"],
    [{ REDIS_WRITE_ACK_REPLICAS: "1" }, "REDIS_WRITE_ACK_REPLICAS"],
    [{ REDIS_WRITE_ACK_REPLICAS: "all" }, "REDIS_WRITE_ACK_REPLICAS"],
    [{ REDIS_URL: "redis://r", REDIS_WRITE_ACK_REPLICAS: "every" }, "REDIS_WRITE_ACK_REPLICAS: must be `all`"],
    [{ REDIS_URL: "redis://r", REDIS_WRITE_ACK_REPLICAS: "65" }, "REDIS_WRITE_ACK_REPLICAS"],
    [
      { REDIS_URL: "redis://r", REDIS_WRITE_ACK_REPLICAS: "1", REDIS_WRITE_ACK_TIMEOUT_MS: "1500" },
      "REDIS_WRITE_ACK_TIMEOUT_MS",
    ],
  ])("refuses %j naming %s", (env, named) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (error) {
      expect((error as ConfigError).message).toContain(named);
    }
  });

  it.each([
    ["PORT", "eighty"],
    ["PORT", "70000"],
    ["METRICS_PORT", "70000"],
    ["METRICS_PORT", "false"],
    ["METRICS_CACHE_MS", "-1"],
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
    const run = spawnSync(process.execPath, [main], {
      env: { PATH: process.env.PATH, PORT: "0", ROOM_MAX_SECONDS: "soon" },
      encoding: "utf8",
      // A guard against a relay that starts anyway (it would never exit), not a measure.
      timeout: 180_000,
    });
    expect(run.status).toBe(78);
    expect(run.stderr).toContain("ROOM_MAX_SECONDS");
  });

  it("the built server exits at start-up when two ways to reach Redis are configured", () => {
    const main = join(__dirname, "../../dist/main.js");
    const env = {
      PATH: process.env.PATH,
      PORT: "0",
      REDIS_URL: "redis://127.0.0.1:1",
      REDIS_SENTINELS: "127.0.0.1:2",
      REDIS_SENTINEL_NAME: "m",
    };
    const run = spawnSync(process.execPath, [main], { env, encoding: "utf8", timeout: 180_000 }); // a guard, as above
    expect(run.status).toBe(78);
    expect(run.stderr).toContain("REDIS_URL and REDIS_SENTINELS");
  });
});
