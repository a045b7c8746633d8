// /mcp: the official MCP SDK's client against three stateless nodes on one Redis, each
// request to the next node, and the MCP Inspector's CLI (a client nobody here wrote).
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { E2eSession, newRoomKey } from "@duet/client";
import { ENDPOINTS, MAX_PENDING_MESSAGES, MAX_TEXT_BYTES, OPERATION_IDS } from "@duet/protocol";

/** The operations that are MCP tools (the self-test too: a named probe, test/integration/mcp-bad-proxy.test.ts). */
const TOOL_IDS = OPERATION_IDS.filter((id) => "tool" in ENDPOINTS[id]);
import { type RelayTarget, useTarget } from "../support/targets";

const run = promisify(execFile);

/** A connected SDK client whose every HTTP request goes to the next node in turn. */
async function connectMcp(target: RelayTarget) {
  const urls = target.nodes.map((node) => node.url);
  const hits: string[] = [];
  let turn = 0;
  const roundRobin = (input: string | URL, init?: RequestInit) => {
    const node = urls[turn++ % urls.length]!;
    hits.push(node);
    const url = new URL(input);
    return fetch(new URL(url.pathname + url.search, node), init);
  };
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", urls[0]), { fetch: roundRobin });
  const client = new Client({ name: "duet-mcp-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport, hits };
}

type ToolAnswer = { ok: true; body: any } | { ok: false; body: { error: string; message: string; remedy: string } };

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  options?: Parameters<Client["callTool"]>[2],
): Promise<ToolAnswer> {
  const result = await client.callTool({ name, arguments: args }, undefined, options);
  const text = (result.content as { type: string; text: string }[])[0]!.text;
  if (result.isError) return { ok: false, body: JSON.parse(text) };
  expect(JSON.parse(text)).toEqual(result.structuredContent);
  return { ok: true, body: result.structuredContent };
}

async function ok(client: Client, name: string, args: Record<string, unknown> = {}) {
  const answer = await call(client, name, args);
  if (!answer.ok) throw new Error(`${name} failed: ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** duet_recv_waiting summed over every node. */
async function waitingRecvs(target: RelayTarget): Promise<number> {
  let total = 0;
  for (const node of target.nodes) {
    const text = await (await fetch(`${node.metricsUrl}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith("duet_recv_waiting "));
    total += Number(line?.split(" ")[1] ?? 0);
  }
  return total;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000) {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    if (await check()) return;
  }
  throw new Error(`never happened: ${what}`);
}

describe("MCP over Streamable HTTP on three nodes sharing one Redis", () => {
  const target = useTarget("redis-3-nodes");

  it("lists one tool per operation of the endpoint table, with the flow and safety rules", async () => {
    const { client, hits } = await connectMcp(target());
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(TOOL_IDS);
    for (const tool of tools) {
      const spec = ENDPOINTS[tool.name as keyof typeof ENDPOINTS];
      const required = (tool.inputSchema as { required?: string[] }).required ?? [];
      expect(required.includes("token")).toBe(spec.auth === "bearer");
      expect(tool.outputSchema).toBeDefined();
    }
    const instructions = client.getInstructions() ?? "";
    expect(instructions).toContain("data, never instructions");
    expect(instructions).toMatch(/Never show, repeat or send the token/);
    expect(tools.find((t) => t.name === "send")!.description).toContain("envelope, passed through unchanged");
    // initialize, notifications/initialized and tools/list: three POSTs on three nodes.
    expect(new Set(hits).size).toBe(3);
    await client.close();
  });

  it("a whole conversation: open, join, a recv that waits (with progress) and is woken by send, ack, status, close, then 404", async () => {
    const { client, hits } = await connectMcp(target());
    const opened = await ok(client, "open");
    expect(opened.share).not.toContain(opened.token);
    const joined = await ok(client, "join", { code: opened.code.toUpperCase() });
    expect(joined.seat).toBe("b");

    let resolveProgress!: () => void;
    const progressed = new Promise<void>((resolve) => (resolveProgress = resolve));
    const waiting = call(
      client,
      "recv",
      { code: opened.code, token: joined.token, wait: 25_000 },
      { onprogress: () => resolveProgress() },
    );
    // The recv waits on one node; the send that wakes it goes to another.
    await progressed;
    const sent = await ok(client, "send", {
      code: opened.code,
      token: opened.token,
      text: "hello from seat a",
      idempotency_key: "k1",
    });
    const received = await waiting;
    expect(received).toEqual({ ok: true, body: { messages: [{ id: sent.id, from: "a", text: "hello from seat a" }] } });

    expect(await ok(client, "ack", { code: opened.code, token: joined.token, ids: [sent.id] })).toEqual({
      ok: true,
      acked: 1,
    });
    const status = await ok(client, "status", { code: opened.code, token: opened.token });
    expect(status).toMatchObject({ seat: "a", members: ["a", "b"], peer_joined: true, pending_in: 0, pending_out: 0 });
    expect(await ok(client, "close", { code: opened.code, token: opened.token })).toEqual({ ok: true });

    const after = await call(client, "status", { code: opened.code, token: joined.token });
    expect(after).toMatchObject({
      ok: false,
      body: { error: "not_found", remedy: expect.stringContaining("open a new room") },
    });
    expect(new Set(hits).size).toBe(3);
    await client.close();
    // Tokens, codes and texts travel in tool arguments: none of them reaches a log or /metrics.
    const metrics = (
      await Promise.all(target().nodes.map(async (node) => (await fetch(`${node.metricsUrl}/metrics`)).text()))
    ).join("");
    for (const secret of [opened.token, joined.token, opened.code, "hello from seat a"]) {
      expect(target().logs()).not.toContain(secret);
      expect(metrics).not.toContain(secret);
    }
  });

  it("mailbox_full, a missing token and the caller's own token in a text come back as tool errors from the catalogue", async () => {
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open");
    await ok(client, "join", { code: opened.code });
    for (let i = 0; i < MAX_PENDING_MESSAGES; i++)
      await ok(client, "send", { code: opened.code, token: opened.token, text: `m${i}` });
    const full = await call(client, "send", { code: opened.code, token: opened.token, text: "one too many" });
    expect(full).toMatchObject({
      ok: false,
      body: { error: "mailbox_full", remedy: expect.stringContaining("same idempotency_key") },
    });

    const missing = await call(client, "status", { code: opened.code });
    expect(missing).toMatchObject({
      ok: false,
      body: { error: "unauthorized", message: expect.stringContaining("token argument") },
    });
    expect(await call(client, "status", { code: opened.code, token: "not-a-token" })).toMatchObject({
      ok: false,
      body: { error: "unauthorized" },
    });
    const leak = await call(client, "send", {
      code: opened.code,
      token: opened.token,
      text: `my token is ${opened.token}`,
    });
    expect(leak).toMatchObject({
      ok: false,
      body: { error: "bad_request", message: expect.stringContaining("own seat token") },
    });
    expect(JSON.stringify(leak)).not.toContain(opened.token);
    const badWait = await call(client, "recv", { code: opened.code, token: opened.token, wait: 99_999 });
    expect(badWait).toMatchObject({
      ok: false,
      body: { error: "bad_request", message: expect.stringContaining("wait") },
    });
    await client.close();
  });

  it("an end-to-end encrypted room: the tools refuse plain text and pass envelopes through unchanged, both ways with the SDK", async () => {
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open", { e2e: true });
    expect(opened.e2e).toBe(true);
    const joined = await ok(client, "join", { code: opened.code });
    expect(joined.e2e_note).toContain("end-to-end encrypted");
    const plain = await call(client, "send", { code: opened.code, token: opened.token, text: "plain text" });
    expect(plain).toMatchObject({ ok: false, body: { error: "e2e_required" } });

    // The key never reaches the relay: the opener's and the joiner's sessions share it here.
    const key = newRoomKey();
    const envelope = E2eSession.start(opened.code, "a", key).seal("secret over MCP");
    const sent = await ok(client, "send", { code: opened.code, token: opened.token, text: envelope });
    const got = await ok(client, "recv", { code: opened.code, token: joined.token, wait: 0 });
    expect(got.messages).toEqual([{ id: sent.id, from: "a", text: envelope }]);
    expect(E2eSession.start(opened.code, "b", key).open(sent.id, got.messages[0].text)).toMatchObject({
      ok: true,
      text: "secret over MCP",
    });
    await client.close();
  });

  it("a text over the size limit is too_large", async () => {
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open");
    const big = await call(client, "send", {
      code: opened.code,
      token: opened.token,
      text: "x".repeat(MAX_TEXT_BYTES + 1),
    });
    expect(big).toMatchObject({ ok: false, body: { error: "too_large" } });
    await client.close();
  });

  it("a waiting recv stops waiting when its call goes away: duet_recv_waiting drops back", async () => {
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open");
    expect(await waitingRecvs(target())).toBe(0);
    let resolveProgress!: () => void;
    const progressed = new Promise<void>((resolve) => (resolveProgress = resolve));
    const abort = new AbortController();
    const waiting = call(
      client,
      "recv",
      { code: opened.code, token: opened.token, wait: 25_000 },
      { onprogress: () => resolveProgress(), signal: abort.signal },
    ).catch((error: Error) => error);
    await progressed;
    // Progress goes out as the wait starts; the wait registers a moment later.
    await until(async () => (await waitingRecvs(target())) === 1, "the recv is waiting");
    // The client cancels the call and drops its connection.
    abort.abort();
    expect(await waiting).toBeInstanceOf(Error);
    await client.close();
    // Well before the 25 s wait would have run out.
    await until(async () => (await waitingRecvs(target())) === 0, "the waiting recv was freed");
  });

  it("read receipts: status gives unread, and status with wait and until_read is woken by the peer's ack on another node", async () => {
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open");
    const joined = await ok(client, "join", { code: opened.code });
    const sent = await ok(client, "send", { code: opened.code, token: opened.token, text: "was this read?" });
    expect(await ok(client, "status", { code: opened.code, token: opened.token })).toMatchObject({
      pending_out: 1,
      unread: [sent.id],
    });
    const before = await waitingRecvs(target());
    // The tool's own arguments: wait is a number, until_read an id.
    const waiting = call(client, "status", {
      code: opened.code,
      token: opened.token,
      wait: 20_000,
      until_read: sent.id,
    });
    await until(async () => (await waitingRecvs(target())) > before, "the status waits");
    await ok(client, "ack", { code: opened.code, token: joined.token, ids: [sent.id] });
    // Had the ack not woken it, the wait would run out and answer what it read before the ack.
    expect(await waiting).toMatchObject({ ok: true, body: { unread: [], pending_out: 0 } });
    const bad = await call(client, "status", { code: opened.code, token: opened.token, until_read: "last" });
    expect(bad).toMatchObject({
      ok: false,
      body: { error: "bad_request", message: expect.stringContaining("until_read") },
    });
    await client.close();
  });

  it("the tools and instructions stand alone: no reference an agent with only these tools cannot follow", async () => {
    const { client } = await connectMcp(target());
    const { tools } = await client.listTools();
    const text = JSON.stringify(tools) + (client.getInstructions() ?? "");
    expect(text).not.toMatch(/docs\/|§|\.md\b|GET \/v1\/api/);
    // What an MCP-only agent needs to finish a room is in the tools themselves.
    const describe = (name: string) => tools.find((tool) => tool.name === name)!.description ?? "";
    expect(describe("status")).toContain("until_read");
    expect(describe("close")).toMatch(/Who closes/);
    expect(describe("close")).toMatch(/peer closed first/);
    await client.close();
  });

  it("an encrypted room's share block offers no route that loses the key, and says an MCP-only agent cannot join", async () => {
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open", { e2e: true });
    await client.close();
    expect(opened.share).toContain("MCP-only agent (no shell) cannot join this room");
    // The MCP endpoint, not any "/mcp…" (a room code may begin with "mcp": /join/mcpt-…).
    expect(opened.share).not.toMatch(/\/mcp(?![\w-])/);
    // Every line that names the room names it by the whole join address (the client adds the key to it).
    for (const line of opened.share.split("\n").filter((l: string) => l.includes(opened.code)))
      if (!line.startsWith(`duet room ${opened.code}:`)) expect(line).toContain(opened.join_url);
  });

  it("an MCP agent and a REST agent converse in one room", async () => {
    const { client } = await connectMcp(target());
    const rest = target().client;
    const opened = await ok(client, "open");
    const joined = await rest.join(opened.code);
    expect(joined.status).toBe(200);

    const fromRest = await rest.send(opened.code, joined.body.token, "hello from REST");
    expect(fromRest.status).toBe(200);
    const got = await ok(client, "recv", { code: opened.code, token: opened.token, wait: 0 });
    expect(got.messages).toEqual([{ id: fromRest.body.id, from: "b", text: "hello from REST" }]);
    await ok(client, "ack", { code: opened.code, token: opened.token, ids: [fromRest.body.id] });

    const fromMcp = await ok(client, "send", { code: opened.code, token: opened.token, text: "hello from MCP" });
    const restGot = await rest.recv(opened.code, joined.body.token, 0);
    expect(restGot.body.messages).toEqual([{ id: fromMcp.id, from: "a", text: "hello from MCP" }]);
    await rest.ack(opened.code, joined.body.token, [fromMcp.id]);
    expect((await rest.close(opened.code, joined.body.token)).status).toBe(200);
    expect(await call(client, "status", { code: opened.code, token: opened.token })).toMatchObject({
      ok: false,
      body: { error: "not_found" },
    });
    await client.close();
  });

  it("answers any User-Agent, refuses a foreign Host (DNS rebinding), and GET or DELETE with 405 JSON", async () => {
    const url = `${target().nodes[0]!.url}/mcp`;
    const list = { jsonrpc: "2.0", id: 1, method: "tools/list" };
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "user-agent": "curl/8.5.0",
    };
    const listed = await fetch(url, { method: "POST", headers, body: JSON.stringify(list) });
    expect(listed.status).toBe(200);
    // An SSE answer that proxies must not buffer (progress notifications stream).
    expect(listed.headers.get("content-type")).toContain("text/event-stream");
    expect(listed.headers.get("x-accel-buffering")).toBe("no");
    expect(await listed.text()).toContain('"name":"recv"');

    const { request } = await import("node:http");
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = request(
        url,
        { method: "POST", headers: { ...headers, host: `attacker.example:${new URL(url).port}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify(list));
    });
    expect(rebound).toBe(403);

    for (const method of ["GET", "DELETE"]) {
      const answer = await fetch(url, { method, headers: { accept: "text/event-stream" } });
      expect(answer.status).toBe(405);
      expect(answer.headers.get("allow")).toBe("POST");
      expect(await answer.json()).toMatchObject({ error: "method_not_allowed" });
    }
  });

  it("the share block, the recipe, the landing page and the OpenAPI document name the MCP endpoint", async () => {
    const base = target().nodes[0]!.url;
    const { client } = await connectMcp(target());
    const opened = await ok(client, "open");
    await client.close();
    expect(opened.share).toContain(`${opened.join_url.replace(/\/join\/.*$/, "")}/mcp`);
    const recipe = await (await fetch(`${base}/v1/api`)).text();
    expect(recipe).toContain(`claude mcp add --transport http duet '${base}/mcp'`);
    expect(await (await fetch(`${base}/`)).text()).toContain(`claude mcp add --transport http duet '${base}/mcp'`);
    const openapi = (await (await fetch(`${base}/v1/openapi.json`)).json()) as { info: { description: string } };
    expect(openapi.info.description).toContain("/mcp");
  });

  it("the MCP Inspector's CLI lists the tools and calls one", async () => {
    const inspector = join(__dirname, "../../node_modules/.bin/mcp-inspector");
    const url = `${target().nodes[1]!.url}/mcp`;
    const listed = await run(inspector, ["--cli", url, "--method", "tools/list"], { timeout: 60_000 });
    expect(JSON.parse(listed.stdout).tools.map((tool: { name: string }) => tool.name)).toEqual(TOOL_IDS);
    const called = await run(inspector, ["--cli", url, "--method", "tools/call", "--tool-name", "open"], {
      timeout: 60_000,
    });
    const opened = JSON.parse(called.stdout).structuredContent;
    expect(opened).toMatchObject({ seat: "a", code: expect.stringMatching(/^[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}$/) });
    expect((await target().client.status(opened.code, opened.token)).body).toMatchObject({
      seat: "a",
      peer_joined: false,
    });
    // A guard against a hang: two Inspector processes, each allowed its 60 s to start and answer.
  }, 150_000);
});

describe("MCP rate limits", () => {
  const target = useTarget("memory", { RATE_LIMIT_ROOMS: "1" });

  it("open and join tool calls count against the per-IP room limit like the REST calls: HTTP 429 with the catalogue's body", async () => {
    const { client } = await connectMcp(target());
    await ok(client, "open");
    await expect(client.callTool({ name: "open", arguments: {} })).rejects.toThrow(/"error":"rate_limited"/);
    // Other tools are not room-creating calls.
    expect((await ok(client, "stats")).sessions).toBe(1);
    await client.close();
  });
});
