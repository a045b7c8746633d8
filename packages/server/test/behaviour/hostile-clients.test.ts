// What a hostile client found it could do to a relay, each as the client would do it (issue
// 36): learn whether a code names a live room, probe codes faster than the join budget,
// make the node hold a request for a body it will never take, have two Host headers read
// as one, flood the public documents, pass ids the store reads as numbers, and have a seat
// token kept by a cache. The connection flood needs a low open-file limit:
// test/integration/connection-flood.test.ts.
import { connect } from "node:net";
import { NODE_LOCAL_TARGETS, PARSER_TARGETS, forEachTarget } from "../support/targets";

const MCP_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const mcpCall = (name: string, args: unknown) => ({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name, arguments: args },
});

/**
 * Writes a raw request on a connection of its own and resolves once the relay has answered
 * (the head and body of one answer) or closed the connection: what it wrote until then.
 */
function rawAnswer(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let text = "";
    socket.setEncoding("latin1");
    const done = () => {
      socket.destroy();
      resolve(text);
    };
    socket.on("data", (chunk: string) => {
      text += chunk;
      const head = text.indexOf("\r\n\r\n");
      const length = /\r\ncontent-length: *([0-9]+)/i.exec(text.slice(0, head))?.[1];
      if (
        head >= 0 &&
        !text.startsWith("HTTP/1.1 100") &&
        length !== undefined &&
        text.length >= head + 4 + Number(length)
      )
        done();
    });
    socket.once("error", reject);
    socket.once("close", done);
  });
}

forEachTarget(
  (target) => {
    it("a Content-Length past the body limit is refused at once: 400 too_large, no 100 Continue, connection closed", async () => {
      const url = target().client.nodeUrl(0);
      const head = (expect100: boolean) =>
        `POST /v1/send HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: duet/0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: 99999999999\r\n${expect100 ? "Expect: 100-continue\r\n" : ""}\r\n`;
      for (const expect100 of [true, false]) {
        // Only the head is sent: a relay that waits for the body never answers (the test's timeout).
        const text = await rawAnswer(url, head(expect100));
        expect({ expect100, status: text.slice(0, 12) }).toEqual({ expect100, status: "HTTP/1.1 400" });
        expect(text).not.toMatch(/100 Continue/);
        expect(text).toMatch(/\r\nconnection: close\r\n/i);
        expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)).error).toBe("too_large");
      }
    });

    it("two Host headers are refused with a JSON 400, not served with the first", async () => {
      const text = await rawAnswer(
        target().client.nodeUrl(0),
        "GET /v1/api HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
      );
      expect(text.slice(0, 12)).toBe("HTTP/1.1 400");
      expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toEqual({
        error: "bad_request",
        message: "Send one Host header.",
      });
    });

    it("one address pipelining thousands of requests cannot hold another client's call behind them", async () => {
      const { hostname, port } = new URL(target().client.nodeUrl(0));
      const FLOOD = 4000;
      // Answers counted by their status lines; /healthz answers are all alike.
      let floodAnswers = 0;
      let floodText = "";
      const flooder = connect({ host: hostname, port: Number(port), localAddress: "127.0.0.1" });
      const other = connect({ host: hostname, port: Number(port), localAddress: "127.0.0.2" });
      try {
        await Promise.all([flooder, other].map((socket) => new Promise((r) => socket.once("connect", r))));
        const firstFloodAnswer = new Promise<void>((resolve) => {
          flooder.setEncoding("latin1");
          flooder.on("data", (chunk: string) => {
            floodText += chunk;
            const lines = floodText.split("HTTP/1.1 200 ");
            floodAnswers += lines.length - 1;
            floodText = lines[lines.length - 1]!;
            if (floodAnswers > 0) resolve();
          });
        });
        flooder.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(FLOOD));
        // Once the node is working through the flood, the other client calls.
        await firstFloodAnswer;
        const answered = new Promise<number>((resolve) => {
          other.setEncoding("latin1");
          other.once("data", () => resolve(floodAnswers));
        });
        other.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        // A node that starts every request it has read answers a chunk of the flood (about
        // 1,800 of these) before it; fair turns start a few per turn for each address.
        expect(await answered).toBeLessThan(FLOOD / 10);
      } finally {
        flooder.destroy();
        other.destroy();
      }
    });

    it("the MCP Host refusal says what to do about the Host, not the User-Agent", async () => {
      // fetch sends its own Host: a raw request names another.
      const body = JSON.stringify(mcpCall("open", {}));
      const text = await rawAnswer(
        target().client.nodeUrl(0),
        `POST /mcp HTTP/1.1\r\nHost: rebound.example\r\nContent-Type: application/json\r\n` +
          `Accept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      expect(text.slice(0, 12)).toBe("HTTP/1.1 403");
      const { error } = JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as {
        error: { message: string; data: { remedy: string } };
      };
      expect(error.message).toMatch(/Invalid Host header/);
      expect(error.data.remedy).not.toMatch(/User-Agent/);
      expect(error.data.remedy).toMatch(/PUBLIC_URL|loopback/);
    });
  },
  { kinds: PARSER_TARGETS },
);

forEachTarget((target) => {
  it('ack refuses ids that are not decimal digits ("-1", "1.5", "0x10", " 1", "1e3") with a JSON 400', async () => {
    const { client } = target();
    const room = await client.pairedRoom();
    const sent = await client.send(room.code, room.a, "hello");
    for (const id of ["-1", "1.5", "0x10", " 1", "1e3", "+1", "", "1".repeat(16)]) {
      const reply = await client.ack(room.code, room.b, [id]);
      expect({ id, status: reply.status, error: reply.body.error }).toEqual({ id, status: 400, error: "bad_request" });
    }
    // The message is still there and its own id acks it.
    expect((await client.ack(room.code, room.b, [sent.body.id])).body.acked).toBe(1);
  });

  it("the join page is the same for a live encrypted room, a plain room and an unknown code", async () => {
    const { client } = target();
    const encrypted = (await client.open({ body: { e2e: true } })).body;
    const plain = (await client.open()).body;
    const unknown = "zzzz-zzzz-zzzz";
    for (const accept of ["text/markdown", "text/html"]) {
      const pages = await Promise.all(
        [encrypted.code, plain.code, unknown].map(async (code) => {
          // One node: the page prints the node's own address.
          const reply = await client.call("GET", `/join/${code}`, { headers: { accept }, node: 0 });
          expect(reply.status).toBe(200);
          return reply.text.split(code).join("<code>");
        }),
      );
      expect({ accept, same: pages[0] === pages[1] && pages[1] === pages[2] }).toEqual({ accept, same: true });
      // The page still says what to do when the address carries a room key.
      expect(pages[0]).toMatch(/end-to-end encrypted/);
    }
  });

  it("MCP open and join answers, which carry a seat token, are no-store", async () => {
    const url = target().client.nodeUrl(0);
    const post = (name: string, args: unknown) =>
      fetch(`${url}/mcp`, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(mcpCall(name, args)) });
    const opened = await post("open", {});
    const openText = await opened.text();
    expect(opened.status).toBe(200);
    expect(opened.headers.get("cache-control")).toMatch(/\bno-store\b/);
    const code = /"code\\?":\\?"([a-z0-9-]+)/.exec(openText)?.[1];
    expect(code).toBeDefined();
    const joined = await post("join", { code });
    await joined.text();
    expect(joined.headers.get("cache-control")).toMatch(/\bno-store\b/);
  });

  it("the public documents are served compressed as the client accepts, with Vary: Accept-Encoding", async () => {
    const url = target().client.nodeUrl(0);
    const plain = await (await fetch(`${url}/v1/openapi.json`, { headers: { "accept-encoding": "identity" } })).text();
    for (const [path, accept] of [
      ["/v1/openapi.json", "application/json"],
      ["/v1/api", "text/markdown"],
      ["/", "text/html"],
      ["/", "text/markdown"],
    ] as const) {
      for (const encoding of ["br", "gzip"]) {
        // fetch decompresses and keeps the header it decompressed.
        const response = await fetch(`${url}${path}`, { headers: { accept, "accept-encoding": encoding } });
        const body = await response.text();
        expect({ path, accept, encoding: response.headers.get("content-encoding") }).toEqual({
          path,
          accept,
          encoding,
        });
        expect(response.headers.get("vary")).toMatch(/Accept-Encoding/i);
        if (path === "/v1/openapi.json") expect(body).toBe(plain);
      }
    }
  });
});

// Small budgets, so that spending them takes a few calls. Which calls count is the node's
// own decision (NODE_LOCAL_TARGETS); rate-limit.test.ts spends both budgets on a Cluster too.
forEachTarget(
  (target) => {
    it("a token that holds no seat counts against the join budget, on a live room and an unknown code alike", async () => {
      const { client } = target();
      const live = (await client.open()).body;
      const wrong = "A".repeat(43);
      const answers: number[] = [];
      // One join (the open above was the first of the budget of 6), then wrong tokens.
      for (let i = 0; i < 8; i++) {
        const code = i % 2 === 0 ? live.code : "zzzz-zzzz-zzzz";
        answers.push((await client.status(code, wrong)).status);
      }
      // 5 of the budget left after the open: 401/404 until it is spent, then 429 for both.
      expect(answers.slice(0, 5).every((s) => s === 401 || s === 404)).toBe(true);
      expect(answers.slice(5)).toEqual([429, 429, 429]);
      // The seat's own calls go on (the request budget is larger).
      expect((await client.status(live.code, live.token)).status).toBe(200);
    });
  },
  { env: { RATE_LIMIT_ROOMS: "6", RATE_LIMIT_WINDOW_SECONDS: "3600" }, kinds: NODE_LOCAL_TARGETS },
);

forEachTarget(
  (target) => {
    it("the public documents and the join page count against the request budget; health probes do not", async () => {
      const url = target().client.nodeUrl(0);
      const statuses: number[] = [];
      for (const path of ["/v1/openapi.json", "/v1/api", "/", "/join/zzzz-zzzz-zzzz", "/v1/openapi.json"]) {
        const response = await fetch(`${url}${path}`);
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429]);
      for (const path of ["/healthz", "/readyz"]) expect((await fetch(`${url}${path}`)).status).toBe(200);
    });
  },
  { env: { RATE_LIMIT_REQUESTS: "4", RATE_LIMIT_WINDOW_SECONDS: "3600" }, kinds: NODE_LOCAL_TARGETS },
);
