// MCP through a bad proxy (issue 29): a real nginx that buffers every answer, ignores the
// relay's X-Accel-Buffering: no and cuts a request after 10 s of upstream silence, with the
// official SDK client behind it. Every waiting tool call must be answered (messages or an
// empty list) before 15 s, whatever wait the agent asked for: the bound is the feature, so
// it is asserted as a time. Before the fix these calls hung until the client gave up.
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startBufferingNginx, type BufferingNginx } from "@duet/testkit";
import { startTarget, type RelayTarget } from "../support/targets";

/** What the issue asks: answered before 15 s behind a proxy that cuts 10 s of silence. */
const ANSWER_BOUND_MS = 15_000;
/** The client's own deadline, above the bound, so a hang fails as a late answer rather than at 60 s. */
const CLIENT_TIMEOUT_MS = 25_000;

type Structured = Record<string, any>;

async function tool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Structured> {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: CLIENT_TIMEOUT_MS });
  const text = (result.content as { type: string; text: string }[])[0]!.text;
  if (result.isError) throw new Error(`${name} answered an error: ${text}`);
  return result.structuredContent as Structured;
}

/** How a call ended and when: an answer, or the error the client saw. */
async function timed(what: string, call: () => Promise<Structured>) {
  const started = performance.now();
  try {
    const answer = await call();
    return { what, ms: performance.now() - started, answer, error: undefined as string | undefined };
  } catch (error) {
    return { what, ms: performance.now() - started, answer: undefined, error: String(error) };
  }
}

describe("MCP behind nginx with proxy_buffering on, X-Accel-Buffering ignored and proxy_read_timeout 10s", () => {
  let target: RelayTarget;
  let proxy: BufferingNginx;
  let client: Client;
  beforeAll(async () => {
    target = await startTarget("redis");
    proxy = await startBufferingNginx(target.nodes[0]!.url, 10);
    client = new Client({ name: "duet-bad-proxy-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", proxy.url)));
  });
  afterAll(async () => {
    await client?.close();
    await proxy?.stop();
    await target?.close();
  });

  it("answers every waiting recv (the default wait, 25 s and 10 s) with messages or an empty list before 15 s", async () => {
    const opened = await tool(client, "open");
    const joined = await tool(client, "join", { code: opened.code });
    const seat = { code: opened.code, token: joined.token };
    // status waiting for a read receipt, in a room of its own (a recv there would answer at once).
    const other = await tool(client, "open");
    await tool(client, "join", { code: other.code });
    const unread = await tool(client, "send", { code: other.code, token: other.token, text: "never acked" });
    // The waits an agent uses: the default (none given), the 25 s the docs name, and 10 s. At
    // once: each is its own POST through the proxy, as several agents' calls would be.
    const calls = await Promise.all([
      timed("recv, default wait", () => tool(client, "recv", seat)),
      timed("recv, wait 25000", () => tool(client, "recv", { ...seat, wait: 25_000 })),
      timed("recv, wait 10000", () => tool(client, "recv", { ...seat, wait: 10_000 })),
      timed("status, wait 25000 until_read a message never acked", () =>
        tool(client, "status", { code: other.code, token: other.token, wait: 25_000, until_read: unread.id }),
      ),
    ]);
    const late = calls.filter((call) => call.error !== undefined || call.ms >= ANSWER_BOUND_MS);
    if (late.length > 0)
      throw new Error(
        `answered before ${ANSWER_BOUND_MS} ms or not at all:\n` +
          calls
            .map(
              (c) =>
                `  ${c.what}: ${c.error ? "failed" : "answered"} after ${Math.round(c.ms)} ms: ${c.error ?? JSON.stringify(c.answer)}`,
            )
            .join("\n"),
      );
    for (const call of calls.slice(0, 3)) expect(call.answer).toEqual({ messages: [] });
    expect(calls[3]!.answer).toMatchObject({ unread: [unread.id] });
  }, 120_000);

  it("a recv that a send wakes behind the proxy still gets the message, before 15 s", async () => {
    const opened = await tool(client, "open");
    const joined = await tool(client, "join", { code: opened.code });
    const waiting = timed("recv woken by a send", () =>
      tool(client, "recv", { code: opened.code, token: joined.token, wait: 25_000 }),
    );
    const sent = await tool(client, "send", { code: opened.code, token: opened.token, text: "through the bad proxy" });
    const call = await waiting;
    if (call.error !== undefined || call.ms >= ANSWER_BOUND_MS)
      throw new Error(`${call.what}: ${call.error ?? "answered"} after ${Math.round(call.ms)} ms`);
    expect(call.answer).toEqual({ messages: [{ id: sent.id, from: "a", text: "through the bad proxy" }] });
  }, 120_000);

  it("the selftest tool names the cut: the probe fails through the proxy, the same probe again says when", async () => {
    // The relay holds a probe at most MCP_MAX_WAIT_MS (10 s), as a waiting recv on MCP: a proxy
    // that cuts 5 s of silence cuts it first.
    const fiveSeconds = await startBufferingNginx(target.nodes[0]!.url, 5);
    const shortClient = new Client({ name: "duet-bad-proxy-test", version: "1.0.0" });
    try {
      await shortClient.connect(new StreamableHTTPClientTransport(new URL("/mcp", fiveSeconds.url)));
      const probe = `probe-${randomBytes(6).toString("hex")}`;
      const held = await timed("selftest, wait 25000", () => tool(shortClient, "selftest", { probe, wait: 25_000 }));
      // The probe is held with nothing on the wire: the proxy cuts it at its 5 s, and the client
      // gets the proxy's error then (no headers had left), not a hang until its own timeout.
      expect(held.error).toMatch(/504|Gateway/i);
      expect(held.ms).toBeLessThan(ANSWER_BOUND_MS);
      const report = await tool(shortClient, "selftest", { probe });
      expect(report).toMatchObject({ probe, outcome: "cut", wait_ms: 10_000 });
      expect(report.after_ms).toBeGreaterThanOrEqual(4_000);
      expect(report.after_ms).toBeLessThan(7_000);
      expect(report.advice.recv_wait_ms).toBeGreaterThanOrEqual(2_000);
      expect(report.advice.recv_wait_ms).toBeLessThanOrEqual(4_000);
      expect(report.advice.text).toMatch(/cut the held answer after (4|5|6)\.\d s/);
    } finally {
      await shortClient.close();
      await fiveSeconds.stop();
    }

    // A probe the path lets through answers itself, and reads the same again.
    const short = `probe-${randomBytes(6).toString("hex")}`;
    const delivered = await tool(client, "selftest", { probe: short, wait: 2_000 });
    expect(delivered).toMatchObject({ probe: short, outcome: "delivered", wait_ms: 2_000 });
    expect(await tool(client, "selftest", { probe: short })).toMatchObject({ outcome: "delivered", wait_ms: 2_000 });
  }, 120_000);
});
