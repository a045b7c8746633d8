// createApp in isolation, through supertest: what needs no listening socket.
import request from "supertest";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { isUserAgentAllowed } from "../../src/http/user-agent";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

const config = loadConfig({ RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0", PUBLIC_URL: "https://duet.example" });
const app = () => createApp({ config, store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }), logger: createLogger("silent") });

describe("createApp", () => {
  it("uses PUBLIC_URL for join_url when it is configured", async () => {
    const reply = await request(app()).post("/v1/open").set("User-Agent", "duet/0.1").send({});
    expect(reply.status).toBe(200);
    expect(reply.body.join_url).toBe(`https://duet.example/join/${reply.body.code}`);
  });

  it("without PUBLIC_URL, honours X-Forwarded-* only from a trusted proxy", async () => {
    const untrusted = createApp({ config: loadConfig({}), store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }), logger: createLogger("silent") });
    const ignored = await request(untrusted).post("/v1/open").set("User-Agent", "duet/0.1").set("X-Forwarded-Host", "evil.example").set("X-Forwarded-Proto", "https").send({});
    expect(ignored.body.join_url).not.toContain("evil.example");
    const trusted = createApp({ config: loadConfig({ TRUST_PROXY: "1" }), store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }), logger: createLogger("silent") });
    const honoured = await request(trusted).post("/v1/open").set("User-Agent", "duet/0.1").set("X-Forwarded-Host", "relay.example").set("X-Forwarded-Proto", "https").send({});
    expect(honoured.body.join_url).toMatch(/^https:\/\/relay\.example\/join\//);
  });

  it("answers HEAD on GET endpoints and sends no ETag", async () => {
    const reply = await request(app()).head("/v1/stats");
    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBeUndefined();
  });

  it("sends no CORS headers to an unknown origin", async () => {
    const reply = await request(app()).options("/v1/open").set("Origin", "https://evil.example").set("Access-Control-Request-Method", "POST");
    expect(reply.headers["access-control-allow-origin"]).toBeUndefined();
  });
});

describe("User-Agent policy", () => {
  it("off accepts anything; strict only duet/", () => {
    expect(isUserAgentAllowed("curl/8", "off")).toBe(true);
    expect(isUserAgentAllowed(undefined, "off")).toBe(true);
    expect(isUserAgentAllowed("my-agent/1", "strict")).toBe(false);
    expect(isUserAgentAllowed("duet/0.1", "strict")).toBe(true);
  });
  it("denylist matches a library token as a whole word, not inside another word", () => {
    expect(isUserAgentAllowed("nodejs-agent/1.0", "denylist")).toBe(true);
    expect(isUserAgentAllowed("gotham/2", "denylist")).toBe(true);
    expect(isUserAgentAllowed("agent (node)", "denylist")).toBe(false);
    expect(isUserAgentAllowed("   ", "denylist")).toBe(false);
  });
});
