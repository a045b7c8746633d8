// GET / (the landing page) and the downloads an agent fetches from the relay (the CLI in one
// file and the skill), through supertest. The built bundle itself is run end to end in
// packages/client/test/integration/bundle.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import request from "supertest";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

const BASE = "https://duet.example";
// The strictest User-Agent policy: these pages must still answer curl and browsers.
const config = loadConfig({ RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0", PUBLIC_URL: BASE, UA_POLICY: "strict" });
const appWith = (publicDir: string) =>
  createApp({
    config,
    store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
    logger: createLogger("silent"),
    publicDir,
  });

let publicDir: string;
beforeAll(() => {
  publicDir = mkdtempSync(join(tmpdir(), "duet-public-"));
  writeFileSync(join(publicDir, "duet.cjs"), "#!/usr/bin/env node\nconsole.log('duet');\n");
  writeFileSync(join(publicDir, "SKILL.md"), "---\nname: duet\n---\n# duet\n");
});
afterAll(() => rmSync(publicDir, { recursive: true, force: true }));

const LINKS = ["/v1/api", "/v1/openapi.json", "/v1/skill.md", "/v1/cli/duet.cjs", "/v1/stats"].map(
  (path) => `${BASE}${path}`,
);

describe("GET /", () => {
  it("is markdown by default: what the relay is, every link, and the one-line CLI download", async () => {
    const reply = await request(appWith(publicDir)).get("/").set("User-Agent", "curl/8.5.0");
    expect(reply.status).toBe(200);
    expect(reply.headers["content-type"]).toBe("text/markdown; charset=utf-8");
    expect(reply.headers.vary).toMatch(/Accept/);
    expect(reply.text).toMatch(/^# duet relay\n\nduet is a temporary, private relay between exactly two agents/);
    for (const link of LINKS) expect(reply.text).toContain(`(${link})`);
    expect(reply.text).toContain(`curl -fsSO '${BASE}/v1/cli/duet.cjs' && node duet.cjs join '<join address>'`);
    expect(reply.text).toContain("Rooms end after 30 minutes idle");
  });

  it("is HTML for a browser, with the same links, and escapes what it shows", async () => {
    const reply = await request(appWith(publicDir))
      .get("/")
      .set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64)")
      .set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8");
    expect(reply.status).toBe(200);
    expect(reply.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(reply.text).toContain("<h1>duet relay</h1>");
    for (const link of LINKS) expect(reply.text).toContain(`<a href="${link}">`);
    expect(reply.text).toContain(
      `curl -fsSO &#39;${BASE}/v1/cli/duet.cjs&#39; &amp;&amp; node duet.cjs join '&lt;join address&gt;'`,
    );
  });

  it("answers HEAD, and only GET and HEAD", async () => {
    expect((await request(appWith(publicDir)).head("/")).status).toBe(200);
    const post = await request(appWith(publicDir)).post("/").send({});
    expect(post.status).toBe(404);
    expect(post.body.error).toBe("not_found");
  });
});

describe("downloads: the CLI bundle and the skill", () => {
  it("serves the CLI as JavaScript and the skill as markdown to any User-Agent, with caching headers", async () => {
    const app = appWith(publicDir);
    const cli = await request(app)
      .get("/v1/cli/duet.cjs")
      .set("User-Agent", "curl/8.5.0")
      .buffer(true)
      .parse((res, done) => {
        let text = "";
        res.on("data", (chunk: Buffer) => (text += chunk.toString()));
        res.on("end", () => done(null, text));
      });
    expect(cli.status).toBe(200);
    expect(cli.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(cli.headers["cache-control"]).toBe("public, max-age=300");
    expect(cli.headers["x-content-type-options"]).toBe("nosniff");
    expect(cli.body).toBe("#!/usr/bin/env node\nconsole.log('duet');\n");

    const skill = await request(app).get("/v1/skill.md");
    expect(skill.status).toBe(200);
    expect(skill.headers["content-type"]).toBe("text/markdown; charset=utf-8");
    expect(skill.text).toBe("---\nname: duet\n---\n# duet\n");
  });

  it("answers 304 to a client that already holds the same file", async () => {
    const app = appWith(publicDir);
    const first = await request(app).get("/v1/skill.md");
    expect(first.headers.etag).toMatch(/^"[\w-]+"$/);
    const again = await request(app).get("/v1/skill.md").set("If-None-Match", first.headers.etag!);
    expect(again.status).toBe(304);
    expect(again.text).toBe("");
    const changed = await request(app).get("/v1/skill.md").set("If-None-Match", '"something-else"');
    expect(changed.status).toBe(200);
  });

  it("serves each file gzip or br when Accept-Encoding asks, with its own ETag, and 304 for that one", async () => {
    const app = appWith(publicDir);
    // supertest asks for gzip unless told otherwise.
    const plain = await request(app).get("/v1/cli/duet.cjs").set("Accept-Encoding", "identity");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    for (const encoding of ["gzip", "br"]) {
      const reply = await request(app).get("/v1/cli/duet.cjs").set("Accept-Encoding", encoding);
      expect(reply.headers["content-encoding"]).toBe(encoding);
      expect(reply.headers.vary).toMatch(/Accept-Encoding/);
      expect(reply.text).toBe(plain.text); // supertest decompresses
      expect(reply.headers.etag).toBe(`${plain.headers.etag!.slice(0, -1)}-${encoding}"`);
      const again = await request(app)
        .get("/v1/cli/duet.cjs")
        .set("Accept-Encoding", encoding)
        .set("If-None-Match", reply.headers.etag!);
      expect(again.status).toBe(304);
    }
  });

  it("a relay built without the files answers a JSON 404 that says so, and serves the rest as usual", async () => {
    const missing = join(publicDir, "no-such-dir");
    const app = appWith(missing);
    for (const path of ["/v1/cli/duet.cjs", "/v1/skill.md"]) {
      const reply = await request(app).get(path);
      expect(reply.status).toBe(404);
      expect(reply.headers["content-type"]).toMatch(/^application\/json/);
      expect(reply.body.error).toBe("not_found");
      expect(reply.body.message).toMatch(/built without/);
    }
    expect((await request(app).get("/")).status).toBe(200);
  });
});

describe("the served CLI defaults to the relay that served it", () => {
  const BUNDLE = '#!/usr/bin/env node\nvar SERVED_FROM = "__DUET_SERVED_FROM__";\nconsole.log(SERVED_FROM);\n';
  let bundleDir: string;
  beforeAll(() => {
    bundleDir = mkdtempSync(join(tmpdir(), "duet-public-served-"));
    writeFileSync(join(bundleDir, "duet.cjs"), BUNDLE);
    writeFileSync(join(bundleDir, "SKILL.md"), 'skill text with "__DUET_SERVED_FROM__" left alone\n');
  });
  afterAll(() => rmSync(bundleDir, { recursive: true, force: true }));

  const served = (app: ReturnType<typeof appWith>, host?: string) => {
    const call = request(app).get("/v1/cli/duet.cjs");
    if (host) call.set("Host", host);
    return call.buffer(true).parse((res, done) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => done(null, text));
    });
  };
  const withoutPublicUrl = () =>
    createApp({
      config: loadConfig({ RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0" }),
      store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
      logger: createLogger("silent"),
      publicDir: bundleDir,
    });

  it("PUBLIC_URL when set, written as a JavaScript string where the bundle's marker was", async () => {
    const reply = await served(appWith(bundleDir));
    expect(reply.status).toBe(200);
    expect(reply.body).toBe(BUNDLE.replace('"__DUET_SERVED_FROM__"', JSON.stringify(BASE)));
    // Only the CLI: the skill is served as it is.
    expect((await request(appWith(bundleDir)).get("/v1/skill.md")).text).toContain('"__DUET_SERVED_FROM__"');
  });

  it("else the address the request reached, as join_url has it; each with its own ETag, and 304 for it", async () => {
    const app = withoutPublicUrl();
    const one = await served(app, "relay-one.test:8080");
    const two = await served(app, "relay-two.test");
    expect(one.body).toContain('var SERVED_FROM = "http://relay-one.test:8080";');
    expect(two.body).toContain('var SERVED_FROM = "http://relay-two.test";');
    const opened = await request(app)
      .post("/v1/open")
      .set("Host", "relay-one.test:8080")
      .set("User-Agent", "duet/0.1")
      .send({});
    expect(opened.body.join_url.startsWith("http://relay-one.test:8080/join/")).toBe(true);
    expect(one.headers.etag).toMatch(/^"[\w-]+"$/);
    expect(one.headers.etag).not.toBe(two.headers.etag);
    const again = await request(app)
      .get("/v1/cli/duet.cjs")
      .set("Host", "relay-one.test:8080")
      .set("If-None-Match", one.headers.etag!);
    expect(again.status).toBe(304);
    const elsewhere = await served(app, "relay-two.test").set("If-None-Match", one.headers.etag!);
    expect(elsewhere.status).toBe(200);
  });

  it("built from the request it is private to the client; forwarded headers count only from a trusted proxy, rightmost", async () => {
    const app = (env: Record<string, string>) =>
      createApp({
        config: loadConfig({ RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0", ...env }),
        store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
        logger: createLogger("silent"),
        publicDir: bundleDir,
      });
    const poisoned = (target: ReturnType<typeof appWith>) =>
      served(target, "relay.test")
        .set("X-Forwarded-Host", "evil.example, real.example")
        .set("X-Forwarded-Proto", "http, https");
    const direct = await poisoned(app({}));
    expect(direct.body).toContain('var SERVED_FROM = "http://relay.test";');
    expect(direct.headers["cache-control"]).toBe("private, max-age=300");
    // supertest connects from loopback: TRUST_PROXY=loopback trusts it as the proxy in front.
    const proxied = await poisoned(app({ TRUST_PROXY: "loopback" }));
    expect(proxied.body).toContain('var SERVED_FROM = "https://real.example";');
    expect(proxied.headers["cache-control"]).toBe("private, max-age=300");
    const fixed = await poisoned(app({ TRUST_PROXY: "loopback", PUBLIC_URL: BASE }));
    expect(fixed.body).toContain(`var SERVED_FROM = ${JSON.stringify(BASE)};`);
    expect(fixed.headers["cache-control"]).toBe("public, max-age=300");
    for (const reply of [direct, proxied, fixed]) expect(reply.body).not.toContain("evil.example");
    // The skill prints no URL: public either way.
    expect((await request(app({})).get("/v1/skill.md")).headers["cache-control"]).toBe("public, max-age=300");
  });
});

describe("the share block, the join page and the recipe", () => {
  it("both say in one line how to get the CLI from this relay and join", async () => {
    const app = appWith(publicDir);
    const opened = await request(app).post("/v1/open").set("User-Agent", "duet/0.1").send({});
    const joinUrl = `${BASE}/join/${opened.body.code}`;
    const line = `curl -fsSO '${BASE}/v1/cli/duet.cjs' && node duet.cjs join '${joinUrl}'`;
    expect(opened.body.share.split("\n")).toContain(`No duet CLI? With Node 20: ${line}`);
    expect(opened.body.share).not.toContain(opened.body.token);

    const markdown = await request(app).get(`/join/${opened.body.code}`).set("User-Agent", "curl/8.5.0");
    expect(markdown.text).toContain(`\`${line}\``);
    expect(markdown.text).toContain(`${BASE}/v1/skill.md`);
    const html = await request(app).get(`/join/${opened.body.code}`).set("Accept", "text/html");
    expect(html.text).toContain(`<code>${line.replace(/&/g, "&amp;").replace(/'/g, "&#39;")}</code>`);

    const recipe = await request(app).get("/v1/api");
    expect(recipe.text).toContain("`GET /v1/cli/duet.cjs`");
    expect(recipe.text).toContain("`GET /v1/skill.md`");
  });

  it("all three say how to finish a room: who closes and when, and what the peer closing first means", async () => {
    const app = appWith(publicDir);
    const opened = await request(app).post("/v1/open").set("User-Agent", "duet/0.1").send({});
    const markdown = (await request(app).get(`/join/${opened.body.code}`)).text;
    const html = (await request(app).get(`/join/${opened.body.code}`).set("Accept", "text/html")).text;
    for (const page of [markdown, html]) {
      expect(page).toMatch(/side that ends the conversation waits until its last message is read/);
      expect(page).toMatch(/If the peer closed first/);
    }
    const recipe = (await request(app).get("/v1/api")).text;
    expect(recipe).toContain("**Who closes, and when.**");
    expect(recipe).toContain("**If the peer closed first**");
    expect(recipe).toContain("### 6b. Was my message read? (read receipts)");
    expect(recipe).toContain(`&until_read=8214307`);
  });

  it("an encrypted room's share block and join page: only routes that carry the key, and no MCP join", async () => {
    const app = appWith(publicDir);
    const opened = await request(app).post("/v1/open").set("User-Agent", "duet/0.1").send({ e2e: true });
    const joinUrl = `${BASE}/join/${opened.body.code}`;
    const share: string = opened.body.share;
    expect(share).not.toMatch(/join this code|call its join tool|\/mcp/);
    expect(share).toContain("An MCP-only agent (no shell) cannot join this room");
    expect(share.split("\n")).toContain(
      `If the duet skill is installed, use it with this address: duet join ${joinUrl}`,
    );
    expect(share.split("\n")).toContain(
      `No duet CLI? With Node 20: curl -fsSO '${BASE}/v1/cli/duet.cjs' && node duet.cjs join '${joinUrl}'`,
    );
    const page = (await request(app).get(`/join/${opened.body.code}`)).text;
    expect(page).toContain("An agent with MCP tools only (no shell) cannot join an encrypted room");
    // The page is the same for every code (no oracle): it tells the reader to join with the
    // whole address they were given, #k= and all.
    expect(page).toContain("duet join '<the join address with #k=…>'");
    // The root page says an encrypted room's share block is a secret, and the code alone is not enough.
    const landing = (await request(app).get("/")).text;
    expect(landing).toMatch(
      /the share block then holds the key and is a secret, and the code alone cannot read the room/,
    );
  });
});
