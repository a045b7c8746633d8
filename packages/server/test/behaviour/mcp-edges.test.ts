// /mcp at its edges, spoken as raw JSON-RPC over HTTP: one message per POST (batches are
// refused, as MCP 2025-06-18 did), Host and Origin checked against DNS rebinding, and tool
// arguments checked by the REST API's schemas whatever their shape.
import { connect } from "node:net";
import { forEachTarget } from "../support/targets";

const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

interface RpcAnswer {
  status: number;
  text: string;
  /** The JSON-RPC message answered (SSE or JSON), when there is one. */
  message?: { id?: unknown; result?: any; error?: { code: number; message: string; data?: unknown } };
}

async function rpc(url: string, body: unknown, headers: Record<string, string> = {}): Promise<RpcAnswer> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { ...HEADERS, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  const data = /^data: (.*)$/m.exec(text)?.[1] ?? (text.startsWith("{") ? text : undefined);
  return { status: response.status, text, message: data === undefined ? undefined : JSON.parse(data) };
}

const call = (id: number, name: string, args: unknown) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args },
});

/** The tool error of a tools/call answer: {error, message, remedy}. */
const toolError = (answer: RpcAnswer) => {
  expect(answer.message?.result?.isError).toBe(true);
  return JSON.parse(answer.message!.result.content[0].text) as { error: string; message: string };
};

/**
 * One raw HTTP/1.1 request on a socket of its own, which this side never ends; resolves with
 * everything the relay wrote once the relay ends the connection. A relay that keeps it open
 * leaves this pending (its keep-alive is 65 s, past the test's timeout), and the test fails.
 * `ended` says the relay's FIN arrived before the socket closed.
 */
function rawExchange(url: string, request: string): Promise<{ text: string; ended: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let text = "";
    let ended = false;
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
    });
    socket.once("end", () => {
      ended = true;
    });
    socket.once("error", reject);
    socket.once("close", () => resolve({ text, ended }));
  });
}

forEachTarget((target) => {
  const url = () => target().nodes[0]?.url ?? target().client.baseUrls[0]!;

  it("honours Connection: close: the answer comes whole, says Connection: close, and the relay ends the connection", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" });
    const { host } = new URL(url());
    const { text, ended } = await rawExchange(
      url(),
      `POST /mcp HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: duet/0.1\r\nContent-Type: application/json\r\n` +
        `Accept: application/json, text/event-stream\r\nConnection: close\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    expect(ended).toBe(true);
    const [head = "", ...rest] = text.split("\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(head).toMatch(/^connection: close$/im);
    expect(head).not.toMatch(/^connection: keep-alive$/im);
    // The tools/list answer itself arrived before the end (SSE, possibly chunked).
    expect(rest.join("\r\n\r\n")).toMatch(/"id":7/);
    expect(rest.join("\r\n\r\n")).toMatch(/"tools":\[/);
  });

  it("refuses a JSON-RPC batch with HTTP 400 and -32600, running none of its calls", async () => {
    const before = (await target().client.stats()).body.sessions;
    // The finding: 100 joins in one POST counted once against the budget that bounds code guessing.
    const batch = Array.from({ length: 100 }, (_, i) => call(i + 1, "open", {}));
    const answer = await rpc(url(), batch);
    expect(answer.status).toBe(400);
    expect(answer.message?.error?.code).toBe(-32600);
    expect(answer.message?.id).toBeNull();
    expect(answer.message?.error?.message).toMatch(/batch/i);
    expect((await rpc(url(), [call(1, "stats", {})])).status).toBe(400);
    expect((await target().client.stats()).body.sessions).toBe(before);
  });

  it("refuses a page of another origin (403), accepts its own origin and clients that send none", async () => {
    const port = new URL(url()).port;
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list" };
    for (const origin of ["https://evil.example", "null", `http://attacker.example:${port}`]) {
      const refused = await rpc(url(), list, { origin });
      expect({ origin, status: refused.status }).toEqual({ origin, status: 403 });
      expect(refused.message?.error?.message).toMatch(/^Invalid Origin header/);
      expect(refused.text).not.toContain("evil.example");
    }
    for (const origin of [undefined, `http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
      const accepted = await rpc(url(), list, origin === undefined ? {} : { origin });
      expect({ origin, status: accepted.status }).toEqual({ origin, status: 200 });
      expect(accepted.message?.result?.tools?.length).toBeGreaterThan(0);
    }
  });

  it("refuses a foreign Host without repeating it", async () => {
    const { request } = await import("node:http");
    const host = `attacker-${"x".repeat(2000)}.example`;
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(`${url()}/mcp`, { method: "POST", headers: { ...HEADERS, host } }, (res) => {
        let text = "";
        res.on("data", (chunk) => (text += chunk)).on("end", () => resolve({ status: res.statusCode!, text }));
      });
      req.on("error", reject);
      req.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
    });
    expect(answer.status).toBe(403);
    expect(answer.text).not.toContain("attacker");
  });

  it("arguments that are not an object are the tool's bad_request, not -32603 with a zod dump", async () => {
    for (const args of [[1], "text", 7, null]) {
      const answer = await rpc(url(), call(1, "open", args));
      expect(answer.status).toBe(200);
      expect(toolError(answer)).toMatchObject({
        error: "bad_request",
        message: "The arguments must be a JSON object.",
      });
    }
  });

  it("a tools/call without params naming the tool is -32602, not -32603 with a zod dump", async () => {
    for (const params of [undefined, null, [], "open", { name: { a: 1 } }, { arguments: {} }]) {
      const answer = await rpc(url(), { jsonrpc: "2.0", id: 7, method: "tools/call", params });
      expect({ params, status: answer.status, code: answer.message?.error?.code, id: answer.message?.id }).toEqual({
        params,
        status: 400,
        code: -32602,
        id: 7,
      });
      expect(answer.text).not.toContain("invalid_type");
    }
  });

  it("a __proto__ argument is an unknown field, as on REST, never silently dropped", async () => {
    const answer = await rpc(
      url(),
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"open","arguments":{"__proto__":{"e2e":true}}}}',
    );
    expect(toolError(answer)).toMatchObject({
      error: "bad_request",
      message: "Unknown field in the arguments: __proto__.",
    });
    const rest = await target().client.call("POST", "/v1/open", { rawBody: '{"__proto__":{"e2e":true}}' });
    expect(rest.body).toMatchObject({ error: "bad_request", message: "Unknown field in the body: __proto__." });
  });

  it("an unknown tool's name comes back cut short", async () => {
    const answer = await rpc(url(), call(1, `x${"y".repeat(10_000)}`, {}));
    expect(answer.message?.error?.code).toBe(-32602);
    expect(answer.text.length).toBeLessThan(400);
  });
});
