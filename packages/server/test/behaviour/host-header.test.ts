// The Host header builds the addresses the relay prints when PUBLIC_URL is unset (every
// behaviour target leaves it unset): only a well-formed host[:port] does, anything else is
// 400; every shell line quotes the URLs it prints; the pages built from the request say that
// no cache may keep them.
import { request } from "node:http";
import { PARSER_TARGETS, forEachTarget } from "../support/targets";

/** One request with a Host of our choosing (fetch will not send one). */
function withHost(
  url: string,
  path: string,
  host: string,
  options: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; text: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      { method: options.method ?? "GET", headers: { host, "user-agent": "duet/0.1", ...options.headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res
          .on("data", (chunk) => (text += chunk))
          .on("end", () => resolve({ status: res.statusCode!, text, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

const HOSTILE_HOSTS = ["x;id>/tmp/PWNED;", "x'y", "a b", "evil.example/x", "user@evil.example", "$(id)"];

forEachTarget((target) => {
  const url = () => target().nodes[0]?.url ?? target().client.baseUrls[0]!;

  it("a Host that is not host[:port] is 400 wherever it would be printed, never echoed", async () => {
    const code = (await target().client.open()).body.code as string;
    for (const host of HOSTILE_HOSTS) {
      for (const [method, path, body] of [
        ["GET", `/join/${code}`],
        ["GET", "/v1/api"],
        ["GET", "/"],
        ["GET", "/v1/openapi.json"],
        ["POST", "/v1/open", "{}"],
      ] as const) {
        const reply = await withHost(url(), path, host, { method, body });
        expect({ host, path, status: reply.status, type: reply.headers["content-type"] }).toEqual({
          host,
          path,
          status: 400,
          type: "application/json; charset=utf-8",
        });
        expect(JSON.parse(reply.text)).toMatchObject({
          error: "bad_request",
          message: expect.stringMatching(/^The Host header/),
        });
        expect(reply.text).not.toContain(host);
      }
    }
  });

  it("prints a well-formed Host's addresses, each URL of a shell line in single quotes", async () => {
    const port = new URL(url()).port;
    const host = `relay-1.example:${port}`;
    const opened = await withHost(url(), "/v1/open", host, { method: "POST", body: "{}" });
    expect(opened.status).toBe(200);
    const { code, join_url: joinUrl, share } = JSON.parse(opened.text);
    expect(joinUrl).toBe(`http://${host}/join/${code}`);
    const fetchLine = `curl -fsSO 'http://${host}/v1/cli/duet.cjs' && node duet.cjs join '${joinUrl}'`;
    expect(share).toContain(fetchLine);
    const page = await withHost(url(), `/join/${code}`, host);
    expect(page.text).toContain(fetchLine);
    expect(page.text).toContain(`curl -s -X POST 'http://${host}/v1/join' `);
    expect(page.text).toContain(`duet join 'http://${host}/join/${code}'`);
    const recipe = await withHost(url(), "/v1/api", host);
    for (const line of recipe.text.split("\n").filter((l) => l.startsWith("curl "))) {
      expect(line).toMatch(new RegExp(`^curl -sN? (?:-X POST )?'http://${host.replace(/\./g, "\\.")}/v1/`));
    }
    const landing = await withHost(url(), "/", host);
    expect(landing.text).toContain(`claude mcp add --transport http duet 'http://${host}/mcp'`);
  });

  it("the pages built from the request carry Cache-Control: no-store", async () => {
    const code = (await target().client.open()).body.code as string;
    for (const path of [`/join/${code}`, "/v1/api", "/", "/v1/openapi.json"]) {
      const reply = await target().client.call("GET", path);
      expect({ path, status: reply.status, cache: reply.headers.get("cache-control") }).toEqual({
        path,
        status: 200,
        cache: "no-store",
      });
    }
  });
});

// Poisoned headers (docs/protocol.md §11.2): X-Forwarded-Host and -Proto count only from a
// proxy TRUST_PROXY trusts, and then only their rightmost value (the one that proxy appended);
// with PUBLIC_URL no header counts at all; and every answer that prints a base URL taken from
// the request says no shared cache may keep it.
const EVIL = "evil.example";
const POISON = { "x-forwarded-host": `${EVIL}, real.example`, "x-forwarded-proto": "https, http" };
const BROWSER = "text/html,application/xhtml+xml";

/** Every answer that prints the base URL: path, method, Accept, and the Cache-Control it must carry. */
const PRINTING = (code: string, publicUrl: boolean) =>
  [
    ["/v1/api", "GET", "*/*", publicUrl ? "public, max-age=300" : "no-store"],
    ["/", "GET", "text/markdown", publicUrl ? "public, max-age=300" : "no-store"],
    ["/", "GET", BROWSER, publicUrl ? "public, max-age=300" : "no-store"],
    [`/join/${code}`, "GET", "text/markdown", publicUrl ? "no-cache" : "no-store"],
    [`/join/${code}`, "GET", BROWSER, publicUrl ? "no-cache" : "no-store"],
    ["/v1/openapi.json", "GET", "application/json", publicUrl ? "public, max-age=300" : "no-store"],
    ["/v1/stats", "GET", BROWSER, publicUrl ? null : "no-store"],
    ["/v1/open", "POST", "application/json", "no-store"],
  ] as const;

function poisonedAnswers(expected: { base: (port: string) => string; publicUrl: boolean }) {
  return (target: () => import("../support/targets").RelayTarget) => {
    const url = () => target().client.baseUrls[0]!;
    it("prints the expected base URL in every answer, never the leftmost forwarded value, with its Cache-Control", async () => {
      const port = new URL(url()).port;
      const code = (await target().client.open()).body.code as string;
      for (const [path, method, accept, cache] of PRINTING(code, expected.publicUrl)) {
        const reply = await withHost(url(), path, `relay.example:${port}`, {
          method,
          body: method === "POST" ? "{}" : undefined,
          headers: { ...POISON, accept },
        });
        const where = { path, accept };
        expect({ ...where, status: reply.status }).toEqual({ ...where, status: 200 });
        expect({ ...where, evil: reply.text.includes(EVIL) }).toEqual({ ...where, evil: false });
        expect({ ...where, base: reply.text.includes(expected.base(port)) }).toEqual({ ...where, base: true });
        expect({ ...where, cache: reply.headers["cache-control"] ?? null }).toEqual({ ...where, cache });
        for (const name of Object.keys(reply.headers))
          expect({ ...where, name, evil: String(reply.headers[name]).includes(EVIL) }).toEqual({
            ...where,
            name,
            evil: false,
          });
      }
    });
  };
}

// The public URL is made in the HTTP layer, whatever the store: the in-process relay and the
// built one as a process (PARSER_TARGETS).
describe("poisoned Host and X-Forwarded-Host", () => {
  describe("without TRUST_PROXY: forwarded headers are ignored, the Host is printed and never cached", () => {
    forEachTarget(poisonedAnswers({ base: (port) => `http://relay.example:${port}`, publicUrl: false }), {
      kinds: PARSER_TARGETS,
    });
  });
  describe("with TRUST_PROXY: only the rightmost X-Forwarded-Host and -Proto, and never cached", () => {
    forEachTarget(poisonedAnswers({ base: () => "http://real.example", publicUrl: false }), {
      env: { TRUST_PROXY: "1" },
      kinds: PARSER_TARGETS,
    });
  });
  describe("with PUBLIC_URL: no header counts, and the pages are public", () => {
    forEachTarget(poisonedAnswers({ base: () => "https://duet.example.test", publicUrl: true }), {
      env: { TRUST_PROXY: "1", PUBLIC_URL: "https://duet.example.test" },
      kinds: PARSER_TARGETS,
    });
  });
});
