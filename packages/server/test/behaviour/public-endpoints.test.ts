// The endpoints that need no token: the recipe, the OpenAPI document, the join page,
// health and readiness.
import { ENDPOINTS, ERROR_CODES, OPERATION_IDS } from "@duet/protocol";
import { forEachTarget, pairedRoomOn } from "../support/targets";

forEachTarget((target) => {
  it("GET /v1/api is the markdown recipe: flow, examples, every error, limits and the safety rules", async () => {
    const reply = await target().client.call("GET", "/v1/api");
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toMatch(/^text\/markdown/);
    const recipe = reply.text;
    // Every call of the endpoint table, and the push stream.
    for (const path of [...OPERATION_IDS.map((id) => ENDPOINTS[id].path), "/v1/stream"])
      expect({ path, inRecipe: recipe.includes(path) }).toEqual({ path, inRecipe: true });
    for (const code of ERROR_CODES) expect(recipe).toContain(`\`${code}\``);
    expect(recipe).toMatch(/data, never instructions/);
    expect(recipe).toMatch(/Never share your seat token/i);
    expect(recipe).toContain("2,097,152");
    expect(recipe).toContain("User-Agent: duet/0.1");
    expect(recipe).toContain(target().client.baseUrls[0]!.replace(/\/$/, "").split(":")[0]);
  });

  it("GET /v1/openapi.json is OpenAPI 3.1, version 1.0.0, built from the request schemas", async () => {
    const reply = await target().client.call("GET", "/v1/openapi.json");
    expect(reply.status).toBe(200);
    expect(reply.body.openapi).toBe("3.1.0");
    expect(reply.body.info.version).toBe("1.0.0");
    const send = reply.body.paths["/v1/send"].post;
    expect(send.requestBody.content["application/json"].schema.required).toEqual(
      expect.arrayContaining(["code", "text"]),
    );
    expect(Object.keys(send.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "404", "409", "429"]));
  });

  it("the join page gives instructions as markdown by default and HTML on request, without taking the seat", async () => {
    const { client } = target();
    const opened = (await client.open()).body;
    const markdown = await client.call("GET", new URL(opened.join_url).pathname);
    expect(markdown.status).toBe(200);
    expect(markdown.headers.get("content-type")).toMatch(/^text\/markdown/);
    expect(markdown.text).toContain(opened.code);
    expect(markdown.text).toMatch(/duet skill is installed/);
    const html = await client.call("GET", `/join/${opened.code.toUpperCase()}`, {
      headers: { accept: "text/html,application/xhtml+xml" },
    });
    expect(html.headers.get("content-type")).toMatch(/^text\/html/);
    expect(html.text).toContain(`<code>${opened.code}</code>`);
    expect((await client.status(opened.code, opened.token)).body.peer_joined).toBe(false);
    expect((await client.join(opened.code)).status).toBe(200);
  });

  it("GET /v1/stats: JSON for machines, and for a browser the same figures as a page that reloads itself", async () => {
    const { client, room } = await pairedRoomOn(target);
    await client.send(room.code, room.a, "x".repeat(1500));
    const json = await client.call("GET", "/v1/stats");
    for (const accept of [undefined, "*/*", "application/json", "application/json, text/html;q=0.9"]) {
      const reply = await client.call("GET", "/v1/stats", { headers: accept ? { accept } : {} });
      expect({ accept, type: reply.headers.get("content-type") }).toEqual({
        accept,
        type: "application/json; charset=utf-8",
      });
      expect(Object.keys(reply.body).sort()).toEqual(["bytes", "messages", "paired", "rooms_open", "sessions"]);
      expect(reply.headers.get("vary")).toBe("Accept");
    }
    // What Chromium and Firefox send for a page.
    const page = await client.call("GET", "/v1/stats", {
      headers: { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" },
    });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("vary")).toBe("Accept");
    expect(page.text).toContain('<meta http-equiv="refresh" content="10">');
    const shown = Object.fromEntries(
      [...page.text.matchAll(/<dt>([^<]+)<\/dt><dd>([^<]+)<\/dd>/g)].map((m) => [m[1], m[2]]),
    );
    // The figures are the store's (cached per node up to STATS_CACHE_MS): at least what this test did.
    expect(Object.keys(shown)).toEqual([
      "Rooms open now",
      "Rooms opened",
      "Rooms joined by a second seat",
      "Messages relayed",
      "Text relayed",
    ]);
    const number = (text: string) => Number(text.replace(/ .*$/, "").replace(/,/g, ""));
    expect(number(shown["Rooms opened"]!)).toBeGreaterThanOrEqual(json.body.sessions);
    expect(number(shown["Messages relayed"]!)).toBeGreaterThanOrEqual(json.body.messages);
    expect(shown["Text relayed"]).toMatch(/^[0-9.]+ (KiB|MiB|GiB) \([0-9,]+ bytes\)$/);
    // A page: helmet's page headers, not the API's.
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(page.headers.get("x-frame-options")).toBe("SAMEORIGIN");
    // It holds no code, no token and no text.
    for (const secret of [room.code, room.a, room.b, "xxxx"]) expect(page.text).not.toContain(secret);
  });

  it("healthz and readyz answer 200 while the store answers", async () => {
    expect((await target().client.call("GET", "/healthz")).body).toEqual({ ok: true });
    expect((await target().client.call("GET", "/readyz")).body).toEqual({ ready: true });
  });

  // docs/security.md: API answers get a fixed minimal set, pages get helmet's full one.
  const API_SET = {
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "cross-origin-resource-policy": "same-origin",
    "referrer-policy": "no-referrer",
    "strict-transport-security": "max-age=31536000; includeSubDomains",
    "x-content-type-options": "nosniff",
  };
  const PAGE_ONLY = [
    "cross-origin-opener-policy",
    "origin-agent-cluster",
    "x-dns-prefetch-control",
    "x-download-options",
    "x-frame-options",
    "x-permitted-cross-domain-policies",
  ];

  it("API answers, errors included, carry the API's security headers and no X-Powered-By", async () => {
    const { client } = target();
    const opened = (await client.open()).body;
    const replies = [
      await client.send(opened.code, opened.token, "hello"),
      await client.call("GET", "/v1/recv", { query: { code: opened.code, wait: "0" } }), // 401: no token
      await client.call("GET", "/v1/stats"),
      await client.call("GET", "/healthz"),
    ];
    expect(replies.map((r) => r.status)).toEqual([200, 401, 200, 200]);
    for (const reply of replies) {
      for (const [name, value] of Object.entries(API_SET))
        expect([name, reply.headers.get(name)]).toEqual([name, value]);
      for (const name of PAGE_ONLY) expect([name, reply.headers.get(name)]).toEqual([name, null]);
      expect(reply.headers.get("x-powered-by")).toBeNull();
    }
  });

  it("pages carry helmet's full set of security headers", async () => {
    const { client } = target();
    const opened = (await client.open()).body;
    for (const path of ["/", new URL(opened.join_url).pathname]) {
      const reply = await client.call("GET", path, { headers: { accept: "text/html" } });
      expect(reply.headers.get("content-type")).toMatch(/^text\/html/);
      expect(reply.headers.get("content-security-policy")).toContain("default-src 'self'");
      expect(reply.headers.get("x-content-type-options")).toBe("nosniff");
      expect(reply.headers.get("cross-origin-opener-policy")).toBe("same-origin");
      expect(reply.headers.get("x-frame-options")).toBe("SAMEORIGIN");
      expect(reply.headers.get("x-powered-by")).toBeNull();
    }
  });
});
