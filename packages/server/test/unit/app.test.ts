// createApp in isolation, through supertest: what needs no listening socket.
import request from "supertest";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { isUserAgentAllowed } from "../../src/http/user-agent";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

const config = loadConfig({ RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0", PUBLIC_URL: "https://duet.example" });
const app = () =>
  createApp({ config, store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }), logger: createLogger("silent") });

describe("createApp", () => {
  it("uses PUBLIC_URL for join_url when it is configured", async () => {
    const reply = await request(app()).post("/v1/open").set("User-Agent", "duet/0.1").send({});
    expect(reply.status).toBe(200);
    expect(reply.body.join_url).toBe(`https://duet.example/join/${reply.body.code}`);
  });

  it("without PUBLIC_URL, honours X-Forwarded-* only from a trusted proxy", async () => {
    const untrusted = createApp({
      config: loadConfig({}),
      store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
      logger: createLogger("silent"),
    });
    const ignored = await request(untrusted)
      .post("/v1/open")
      .set("User-Agent", "duet/0.1")
      .set("X-Forwarded-Host", "evil.example")
      .set("X-Forwarded-Proto", "https")
      .send({});
    expect(ignored.body.join_url).not.toContain("evil.example");
    const trusted = createApp({
      config: loadConfig({ TRUST_PROXY: "1" }),
      store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
      logger: createLogger("silent"),
    });
    const honoured = await request(trusted)
      .post("/v1/open")
      .set("User-Agent", "duet/0.1")
      .set("X-Forwarded-Host", "relay.example")
      .set("X-Forwarded-Proto", "https")
      .send({});
    expect(honoured.body.join_url).toMatch(/^https:\/\/relay\.example\/join\//);
  });

  it("answers HEAD on GET endpoints and sends no ETag", async () => {
    const reply = await request(app()).head("/v1/stats");
    expect(reply.status).toBe(200);
    expect(reply.headers.etag).toBeUndefined();
  });

  it("sends no CORS headers to an unknown origin", async () => {
    const reply = await request(app())
      .options("/v1/open")
      .set("Origin", "https://evil.example")
      .set("Access-Control-Request-Method", "POST");
    expect(reply.headers["access-control-allow-origin"]).toBeUndefined();
  });
});

describe("room calls' dispatch", () => {
  // The table's spelling of a room call and every other spelling Express accepts (a trailing
  // slash, another case) walk the same layers, so they answer alike.
  const lines: Record<string, unknown>[] = [];
  const logged = () =>
    createApp({
      config,
      store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
      logger: createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line)) }),
    });

  it("serves the table's spelling and Express's other spellings alike, and logs each by its route", async () => {
    const relay = logged();
    const agent = (path: string) => request(relay).post(path).set("User-Agent", "duet/0.1");
    const opened = (await agent("/v1/open").send({})).body;
    const joined = (await agent("/v1/join").send({ code: opened.code })).body;
    lines.length = 0;
    for (const path of ["/v1/send", "/v1/send/", "/V1/Send"]) {
      const reply = await agent(path)
        .set("Authorization", `Bearer ${opened.token}`)
        .send({ code: opened.code, text: path });
      expect([path, reply.status, typeof reply.body.id]).toEqual([path, 200, "string"]);
      expect(reply.headers["x-content-type-options"]).toBe("nosniff");
    }
    const recv = await request(relay)
      .get(`/v1/recv?code=${joined.code}&wait=0`)
      .set("User-Agent", "duet/0.1")
      .set("Authorization", `Bearer ${joined.token}`);
    expect(recv.body.messages.map((m: { text: string }) => m.text)).toEqual(["/v1/send", "/v1/send/", "/V1/Send"]);
    const requests = lines
      .filter((line) => line.msg === "request")
      .map(({ method, route, status }) => [method, route, status]);
    expect(requests).toEqual([...Array(3).fill(["POST", "/v1/send", 200]), ["GET", "/v1/recv", 200]]);
  });

  it("answers errors with the same JSON on both paths: token, User-Agent, body, method", async () => {
    const relay = logged();
    for (const path of ["/v1/ack", "/v1/ack/"]) {
      const noToken = await request(relay)
        .post(path)
        .set("User-Agent", "duet/0.1")
        .send({ code: "k7dq-3mxa-9z2f", ids: [] });
      expect([path, noToken.status, noToken.body.error]).toEqual([path, 401, "unauthorized"]);
      const library = await request(relay).post(path).set("User-Agent", "curl/8.0").send({});
      expect([path, library.status, library.body.error]).toEqual([path, 403, "forbidden"]);
      const badJson = await request(relay)
        .post(path)
        .set("User-Agent", "duet/0.1")
        .set("Authorization", "Bearer x")
        .set("Content-Type", "application/json")
        .send("{");
      expect([path, badJson.status, badJson.body.error]).toEqual([path, 400, "bad_request"]);
      const put = await request(relay).put(path).set("User-Agent", "duet/0.1").send({});
      expect([path, put.status, put.body.error, put.headers.allow]).toEqual([path, 405, "method_not_allowed", "POST"]);
    }
    const unknown = await request(relay).post("/v1/sendx").set("User-Agent", "duet/0.1").send({});
    expect([unknown.status, unknown.body.error]).toEqual([404, "not_found"]);
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
