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
});
