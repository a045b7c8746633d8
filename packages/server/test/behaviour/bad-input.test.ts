// Bad input: every refusal is a clear JSON error {"error","message"} with the documented
// status, never a 5xx, a hang or a crash.
import {
  ENDPOINTS,
  MAX_BODY_BYTES,
  MAX_BODY_DEPTH,
  MAX_BODY_ITEMS,
  MAX_TEXT_BYTES,
  OPERATION_IDS,
} from "@duet/protocol";
import { forEachTarget, PARSER_TARGETS, type RelayTarget, pairedRoomOn } from "../support/targets";

/** A send whose body is sent as is, declared JSON. */
const sendRaw = (target: RelayTarget, token: string, raw: string | Buffer) =>
  target.client.call("POST", "/v1/send", { rawBody: raw, token, headers: { "content-type": "application/json" } });

const expectError = (reply: { status: number; body: any }, status: number, error: string) => {
  expect({ status: reply.status, error: reply.body?.error }).toEqual({ status, error });
  expect(typeof reply.body.message).toBe("string");
  expect(reply.body.message.length).toBeGreaterThan(10);
  expect(Object.keys(reply.body).sort()).toEqual(["error", "message"]);
};

forEachTarget((target) => {
  describe("authentication", () => {
    it("a missing or malformed Authorization header is 401 unauthorized", async () => {
      const { client, room } = await pairedRoomOn(target);
      expectError(await client.call("GET", "/v1/status", { query: { code: room.code } }), 401, "unauthorized");
      for (const header of ["Basic abc", "Bearer", "Bearer ", `Token ${room.a}`]) {
        expectError(
          await client.call("GET", "/v1/status", { query: { code: room.code }, headers: { authorization: header } }),
          401,
          "unauthorized",
        );
      }
    });

    it("accepts the bearer scheme in any case", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (const scheme of ["bearer", "BEARER", "Bearer"]) {
        const reply = await client.call("GET", "/v1/status", {
          query: { code: room.code },
          headers: { authorization: `${scheme} ${room.a}` },
        });
        expect(reply.status).toBe(200);
      }
    });

    it("a wrong token, or another room's token, is 401 on an existing room", async () => {
      const { client, room } = await pairedRoomOn(target);
      const other = await client.pairedRoom();
      expectError(await client.status(room.code, "not-a-real-token"), 401, "unauthorized");
      expectError(await client.status(room.code, other.a), 401, "unauthorized");
      expectError(await client.send(room.code, other.b, "intruder"), 401, "unauthorized");
      expectError(await client.ack(room.code, other.b, ["1"]), 401, "unauthorized");
      expectError(await client.close(room.code, other.b, true), 401, "unauthorized");
      expectError(await client.recv(room.code, other.b, 0), 401, "unauthorized");
      expect((await client.status(room.code, room.a)).status).toBe(200);
    });

    it("a token used on an unknown code is 404", async () => {
      const { client, room } = await pairedRoomOn(target);
      expectError(await client.status("zzzz-zzzz-zzz0", room.a), 404, "not_found");
    });
  });

  describe("User-Agent policy (room endpoints)", () => {
    const refused = [
      "",
      "curl/8.5.0",
      "Wget/1.21",
      "python-requests/2.31",
      "Python-urllib/3.11",
      "Python/3.11 aiohttp/3.9",
      "python-httpx/0.27",
      "axios/1.6.0",
      "node-fetch/1.0",
      "undici",
      "node",
      "got (https://github.com/sindresorhus/got)",
      "Go-http-client/1.1",
      "okhttp/4.12",
      "Java/17.0.2",
      "Apache-HttpClient/5.2",
      "libwww-perl/6.7",
      "PostmanRuntime/7.36",
      "insomnia/8.0",
    ];

    it.each(refused)("refuses %j with 403 forbidden", async (userAgent) => {
      const reply = await target().client.call("POST", "/v1/open", { body: {}, headers: { "user-agent": userAgent } });
      expectError(reply, 403, "forbidden");
    });

    it("accepts duet/<version> in any case and other agents' own names", async () => {
      for (const userAgent of ["duet/0.1", "DUET/0.2", "my-agent/1.0", "Mozilla/5.0 (X11; Linux x86_64)"]) {
        expect(
          (await target().client.call("POST", "/v1/open", { body: {}, headers: { "user-agent": userAgent } })).status,
        ).toBe(200);
      }
    });

    it("lets any User-Agent read /v1/api, /v1/stats, /v1/openapi.json, the join page and health", async () => {
      const { client } = target();
      const code = (await client.open()).body.code;
      for (const path of ["/v1/api", "/v1/stats", "/v1/openapi.json", `/join/${code}`, "/healthz", "/readyz"]) {
        expect((await client.call("GET", path, { headers: { "user-agent": "curl/8.5.0" } })).status).toBe(200);
      }
    });
  });

  describe("query parameters", () => {
    it("a wait outside 0..25000 or not an integer is 400 bad_request", async () => {
      const { client, room } = await pairedRoomOn(target);
      for (const wait of ["-1", "25001", "1.5", "abc", "", "1e3"]) {
        expectError(
          await client.call("GET", "/v1/recv", { query: { code: room.code, wait }, token: room.a }),
          400,
          "bad_request",
        );
      }
      expect(
        await client
          .call("GET", "/v1/recv", {
            query: { code: room.code, wait: "25000" },
            token: room.a,
            signal: AbortSignal.timeout(200),
          })
          .catch((e) => e.name),
      ).toBe("TimeoutError");
    });

    it("a missing or malformed code is 400 bad_request; a repeated parameter too", async () => {
      const { client, room } = await pairedRoomOn(target);
      expectError(await client.call("GET", "/v1/status", { token: room.a }), 400, "bad_request");
      expectError(
        await client.call("GET", "/v1/status", { query: { code: "nope" }, token: room.a }),
        400,
        "bad_request",
      );
      expectError(
        await client.call("GET", `/v1/recv?code=${room.code}&wait=1&wait=2`, { token: room.a }),
        400,
        "bad_request",
      );
    });
  });

  describe("paths and methods", () => {
    it("an unknown path is 404 not_found as JSON", async () => {
      expectError(await target().client.call("GET", "/v2/open"), 404, "not_found");
      expectError(await target().client.call("GET", "/join/not-a-code"), 404, "not_found");
    });

    it("a known path with the wrong method is 405 method_not_allowed with Allow", async () => {
      const reply = await target().client.call("GET", "/v1/send");
      expectError(reply, 405, "method_not_allowed");
      expect(reply.headers.get("allow")).toBe("POST");
      expectError(await target().client.call("DELETE", "/v1/recv"), 405, "method_not_allowed");
    });

    it("OPTIONS on an API path is the JSON 405 with Allow (not 200 text/plain), HEAD on the stream too", async () => {
      const { client } = target();
      const paths: [string, string][] = [
        ...OPERATION_IDS.map((id): [string, string] => [ENDPOINTS[id].path, ENDPOINTS[id].method]),
        ["/v1/stream", "GET"],
        ["/mcp", "POST"],
      ];
      for (const [path, method] of paths) {
        const reply = await client.call("OPTIONS", path);
        expectError(reply, 405, "method_not_allowed");
        expect({ path, allow: reply.headers.get("allow") }).toEqual({
          path,
          allow: method === "GET" && path !== "/v1/stream" ? "GET, HEAD" : method,
        });
      }
      const head = await client.call("HEAD", "/v1/stream");
      expect({ status: head.status, allow: head.headers.get("allow") }).toEqual({ status: 405, allow: "GET" });
    });

    it("OPTIONS and HEAD answer the same 405 on every spelling the routes match (case, trailing slash)", async () => {
      const { client } = target();
      for (const path of ["/v1/join/", "/V1/JOIN", "/V1/Recv/", "/MCP", "/mcp/", "/v1/Stats/"]) {
        const reply = await client.call("OPTIONS", path);
        expectError(reply, 405, "method_not_allowed");
      }
      for (const path of ["/v1/stream/", "/V1/STREAM", "/v1/Stream/"]) {
        const head = await client.call("HEAD", path);
        expect({ path, status: head.status, allow: head.headers.get("allow") }).toEqual({
          path,
          status: 405,
          allow: "GET",
        });
      }
    });

    it("every operation of the endpoint table answers another method with 405 and its one method in Allow", async () => {
      for (const id of OPERATION_IDS) {
        const { method, path } = ENDPOINTS[id];
        const reply = await target().client.call(
          method === "GET" ? "POST" : "GET",
          path,
          method === "GET" ? { body: {} } : {},
        );
        expectError(reply, 405, "method_not_allowed");
        expect(reply.headers.get("allow")).toBe(method === "GET" ? "GET, HEAD" : "POST");
      }
    });
  });
});

forEachTarget((target) => {
  it("a path that cannot be percent-decoded is 400 bad_request, not a 5xx", async () => {
    const reply = await target().client.call("GET", "/join/k7dq-3mxa-9z2f%ZZ");
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe("bad_request");
  });
});

// Bodies refused by the HTTP layer before any store is touched (parsing, size, shape, what
// an error repeats): the same code on every store, and the heaviest requests of the suite
// (13 MiB bodies, millions of items). They run where the HTTP layer can differ: in-process
// and as the built relay process (PARSER_TARGETS).
forEachTarget(
  (target) => {
    describe("bodies", () => {
      it("malformed JSON is 400 bad_request", async () => {
        const { client } = target();
        for (const raw of ["{", "{'code': 1}", "nul", '{"code": "a",}']) {
          expectError(
            await client.call("POST", "/v1/join", { rawBody: raw, headers: { "content-type": "application/json" } }),
            400,
            "bad_request",
          );
        }
      });

      it("a body that is not an object, or fields of the wrong type, is 400 bad_request", async () => {
        const { client, room } = await pairedRoomOn(target);
        for (const body of [[], "text", 42, null])
          expectError(await client.call("POST", "/v1/join", { body }), 400, "bad_request");
        expectError(await client.call("POST", "/v1/join", { body: { code: 12 } }), 400, "bad_request");
        expectError(await client.call("POST", "/v1/join", { body: {} }), 400, "bad_request");
        expectError(
          await client.call("POST", "/v1/send", { body: { code: room.code, text: 5 }, token: room.a }),
          400,
          "bad_request",
        );
        expectError(
          await client.call("POST", "/v1/send", { body: { code: room.code }, token: room.a }),
          400,
          "bad_request",
        );
        expectError(
          await client.call("POST", "/v1/ack", { body: { code: room.code, ids: "1" }, token: room.a }),
          400,
          "bad_request",
        );
        expectError(
          await client.call("POST", "/v1/ack", { body: { code: room.code, ids: [1] }, token: room.a }),
          400,
          "bad_request",
        );
        expectError(
          await client.call("POST", "/v1/close", { body: { code: room.code, force: "yes" }, token: room.a }),
          400,
          "bad_request",
        );
        expectError(
          await client.call("POST", "/v1/send", {
            body: { code: room.code, text: "x", idempotencyKey: "k" },
            token: room.a,
          }),
          400,
          "bad_request",
        );
      });

      it("parses JSON whatever the Content-Type says", async () => {
        const { client } = target();
        const reply = await client.call("POST", "/v1/open", {
          rawBody: "{}",
          headers: { "content-type": "text/plain" },
        });
        expect(reply.status).toBe(200);
      });

      it("invalid UTF-8 is 400 bad_request, never silently replaced", async () => {
        const { client, room } = await pairedRoomOn(target);
        const raw = Buffer.concat([
          Buffer.from(`{"code":"${room.code}","text":"bad `),
          Buffer.from([0xff, 0xfe]),
          Buffer.from(`"}`),
        ]);
        expectError(await sendRaw(target(), room.a, raw), 400, "bad_request");
        expect((await client.recv(room.code, room.b, 0)).body.messages).toEqual([]);
      });

      it("a lone surrogate escape is 400 bad_request (it has no UTF-8 form)", async () => {
        const { room } = await pairedRoomOn(target);
        const raw = `{"code":"${room.code}","text":"half \\ud800 a pair"}`;
        expectError(await sendRaw(target(), room.a, raw), 400, "bad_request");
      });

      it(`a body over ${MAX_BODY_BYTES} bytes is 400 too_large`, async () => {
        const { room } = await pairedRoomOn(target);
        const raw = `{"code":"${room.code}","text":"${"x".repeat(MAX_BODY_BYTES)}"}`;
        expectError(await sendRaw(target(), room.a, raw), 400, "too_large");
      });
    });

    describe("the shape of a body (docs/protocol.md §3.4)", () => {
      const keys = (n: number) => Array.from({ length: n }, (_, i) => `"${i.toString(16)}":1`).join(",");
      const mcpHeaders = { accept: "application/json, text/event-stream", "content-type": "application/json" };

      it(`more than ${MAX_BODY_ITEMS} fields, however many, is 400 bad_request before any other check`, async () => {
        const { client } = target();
        // The body: 11.5 MB, 1.15 million keys. /v1/send without a token answered 401
        // after holding the event loop for 0.7 s; /mcp answered 200 with an 8 MB list of them.
        const huge = `{${keys(1_150_000)}}`;
        expectError(await client.call("POST", "/v1/send", { rawBody: huge }), 400, "bad_request");
        expectError(
          await client.call("POST", "/v1/open", { rawBody: `{${keys(MAX_BODY_ITEMS + 1)}}` }),
          400,
          "bad_request",
        );
        const mcp = await client.call("POST", "/mcp", {
          rawBody: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stats","arguments":{${keys(1_150_000)}}}}`,
          headers: mcpHeaders,
        });
        expect({ status: mcp.status, bytes: mcp.text.length < 400 }).toEqual({ status: 400, bytes: true });
        expect(mcp.text).toContain("fields and array items");
      });

      it(`nesting deeper than ${MAX_BODY_DEPTH}, and an array of millions of ids, are 400 bad_request`, async () => {
        const { client, room } = await pairedRoomOn(target);
        const deep = `${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}`;
        expectError(await client.call("POST", "/v1/open", { rawBody: deep }), 400, "bad_request");
        const ids = `{"code":"${room.code}","ids":[${'"1",'.repeat(1_000_000)}"1"]}`;
        expectError(await client.call("POST", "/v1/ack", { rawBody: ids, token: room.b }), 400, "bad_request");
        // The largest legal shapes still pass: 64 ids, and a pretty-printed body.
        const legal = JSON.stringify(
          { code: room.code, ids: Array.from({ length: 64 }, (_, i) => String(i)) },
          null,
          8,
        );
        expect((await client.call("POST", "/v1/ack", { rawBody: legal, token: room.b })).body).toEqual({
          ok: true,
          acked: 0,
        });
      });

      it("a field named twice, at any depth and however escaped, is 400 bad_request naming it, before any other check", async () => {
        const { client, room } = await pairedRoomOn(target);
        // Before the token check (no token here), as every refusal of the body's shape.
        const join = await client.call("POST", "/v1/join", { rawBody: `{"code":"${room.code}","code":"y"}` });
        expectError(join, 400, "bad_request");
        expect(join.body.message).toBe("The body names the field code twice: send each field once.");
        const send = await client.call("POST", "/v1/send", {
          rawBody: `{"code":"${room.code}","text":"one","\\u0074ext":"two"}`,
          token: room.a,
        });
        expectError(send, 400, "bad_request");
        expect(send.body.message).toContain("text twice");
        const nested = await client.call("POST", "/v1/ack", {
          rawBody: `{"code":"${room.code}","ids":[],"x":{"y":[{"z":1,"z":2}]}}`,
          token: room.b,
        });
        expectError(nested, 400, "bad_request");
        expect(nested.body.message).toContain("z twice (in x.y.0)");
        // Nothing was sent: the refused send left no message.
        expect((await client.recv(room.code, room.b, 0)).body.messages).toEqual([]);
        // MCP: the JSON-RPC envelope and a tool's arguments alike.
        for (const rawBody of [
          '{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}',
          `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"join","arguments":{"code":"${room.code}","code":"x"}}}`,
        ]) {
          const mcp = await client.call("POST", "/mcp", { rawBody, headers: mcpHeaders });
          expect({ status: mcp.status, twice: /(id|code) twice/.test(mcp.text) }).toEqual({ status: 400, twice: true });
        }
      });

      it("a text or a field name longer than any legal text is refused as such, in a short answer", async () => {
        const { client, room } = await pairedRoomOn(target);
        const name = await client.call("POST", "/v1/open", { rawBody: `{"${"k".repeat(3 * MAX_TEXT_BYTES)}":1}` });
        expectError(name, 400, "bad_request");
        expect(name.text.length).toBeLessThan(200);
        const text = await client.call("POST", "/v1/send", {
          rawBody: `{"code":"${room.code}","text":"${"\\u00e9".repeat(MAX_TEXT_BYTES)}"}`,
          token: room.a,
        });
        expectError(text, 400, "too_large");
      });
    });

    describe("what an error repeats of the request (never more than a short name)", () => {
      it("an unknown field's name comes back cut to 16 characters, and at most three of them", async () => {
        const { client } = target();
        const secret = "tokenlike-3n2Qm9vXr7LwPq0sTb5Ky8Hd1Fj6Gc4Ae"; // 43 characters, like a seat token
        const reply = await client.call("POST", "/v1/open", { body: { [secret]: 1 } });
        expectError(reply, 400, "bad_request");
        expect(reply.body.message).toContain(secret.slice(0, 16));
        expect(reply.text).not.toContain(secret.slice(0, 17));
        const many = await client.call("POST", "/v1/open", {
          rawBody: `{${Array.from({ length: 200 }, (_, i) => `"${"n".repeat(5000)}${i}":1`).join(",")}}`,
        });
        expectError(many, 400, "bad_request");
        expect(many.text.length).toBeLessThan(200);
        expect(many.body.message).toMatch(/and 197 more\.$/);
      });

      it("a megabyte field name is never sent back (the answer stays under 200 bytes)", async () => {
        const { client } = target();
        const reply = await client.call("POST", "/v1/open", { rawBody: `{"${"x".repeat(1_000_000)}":1}` });
        expectError(reply, 400, "bad_request");
        expect(reply.text.length).toBeLessThan(200);
      });
    });
  },
  { kinds: PARSER_TARGETS },
);
