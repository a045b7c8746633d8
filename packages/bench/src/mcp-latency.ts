// `pnpm --filter @duet/bench mcp-latency`: what a call costs through /mcp against the same
// call over REST, on one duet node on our own Redis (docs/mcp.md). Measures, one call at a
// time and interleaved (REST, MCP, REST, MCP ...): send, and a woken recv (a recv already
// waiting, timed from the start of the send that wakes it until its answer arrives). Both
// sides use Node's fetch with keep-alive; MCP through the official SDK client (Client +
// StreamableHTTPClientTransport), stateless, so each tool call is one POST answered as SSE.
// Writes results/mcp-latency.md and prints it. `--smoke` runs a few calls only and prints one line.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { USER_AGENT } from "@duet/protocol";
import { duetEnv, startRedis, startServer } from "./processes.js";
import { sleep, summarize } from "./stats.js";

const smoke = process.argv.includes("--smoke");
const SAMPLES = smoke ? 10 : 300;
/** How long a recv is left waiting before the send that wakes it. */
const SETTLE_MS = 20;

interface Seat {
  code: string;
  token: string;
}

async function rest<T>(base: string, method: "GET" | "POST", path: string, body?: unknown, token?: string): Promise<T> {
  const headers: Record<string, string> = { "user-agent": USER_AGENT };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(base + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 200)}`);
  return JSON.parse(text) as T;
}

async function tool<T>(client: Client, name: string, args: Record<string, unknown>): Promise<T> {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent as T;
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const duet = await startServer("duet", "duet-node.js", { env: duetEnv(redis.url) });
  const mcp = new Client({ name: "duet-bench", version: "1.0.0" });
  try {
    await mcp.connect(new StreamableHTTPClientTransport(new URL("/mcp", duet.url)));
    const a = await rest<Seat>(duet.url, "POST", "/v1/open", {});
    const b = await rest<Seat>(duet.url, "POST", "/v1/join", { code: a.code });
    const samples = {
      restSend: [] as number[],
      mcpSend: [] as number[],
      restWoken: [] as number[],
      mcpWoken: [] as number[],
    };
    const drain = async () => {
      const { messages } = await rest<{ messages: { id: string }[] }>(
        duet.url,
        "GET",
        `/v1/recv?code=${b.code}&wait=0`,
        undefined,
        b.token,
      );
      if (messages.length)
        await rest(duet.url, "POST", "/v1/ack", { code: b.code, ids: messages.map((m) => m.id) }, b.token);
    };

    for (let i = 0; i < SAMPLES + 5; i++) {
      const keep = i >= 5; // the first rounds warm both paths up
      let t = performance.now();
      await rest(duet.url, "POST", "/v1/send", { code: a.code, text: `rest ${i}` }, a.token);
      if (keep) samples.restSend.push(performance.now() - t);
      t = performance.now();
      await tool(mcp, "send", { code: a.code, token: a.token, text: `mcp ${i}` });
      if (keep) samples.mcpSend.push(performance.now() - t);
      await drain();

      const restRecv = rest<{ messages: unknown[] }>(
        duet.url,
        "GET",
        `/v1/recv?code=${b.code}&wait=25000`,
        undefined,
        b.token,
      );
      await sleep(SETTLE_MS);
      t = performance.now();
      await rest(duet.url, "POST", "/v1/send", { code: a.code, text: `wake rest ${i}` }, a.token);
      if ((await restRecv).messages.length !== 1) throw new Error("the REST recv did not get its message");
      if (keep) samples.restWoken.push(performance.now() - t);
      await drain();

      const mcpRecv = tool<{ messages: unknown[] }>(mcp, "recv", { code: b.code, token: b.token, wait: 25_000 });
      await sleep(SETTLE_MS);
      t = performance.now();
      await rest(duet.url, "POST", "/v1/send", { code: a.code, text: `wake mcp ${i}` }, a.token);
      if ((await mcpRecv).messages.length !== 1) throw new Error("the MCP recv did not get its message");
      if (keep) samples.mcpWoken.push(performance.now() - t);
      await drain();
    }

    const row = (name: string, list: number[]) => {
      const s = summarize(list);
      return `| ${name} | ${s.count} | ${s.p50.toFixed(2)} | ${s.p99.toFixed(2)} | ${s.max.toFixed(2)} |`;
    };
    const report = `# MCP tool calls against REST calls

One duet node on Redis, one call at a time, REST and MCP interleaved; ${cpus().length} x ${cpus()[0]?.model.trim() ?? "?"}.
"Woken recv": a recv already waiting ${SETTLE_MS} ms, timed from the start of the REST send that wakes it until the recv's answer arrives.
Command: \`pnpm --filter @duet/bench... build && pnpm --filter @duet/bench mcp-latency\`${smoke ? " (--smoke: a few calls only)" : ""}.

| call | samples | p50 ms | p99 ms | max ms |
|---|---|---|---|---|
${row("send, REST", samples.restSend)}
${row("send, MCP tool", samples.mcpSend)}
${row("woken recv, REST", samples.restWoken)}
${row("woken recv, MCP tool", samples.mcpWoken)}
`;
    const dir = join(__dirname, "..", "results", ...(smoke ? ["smoke"] : []));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "mcp-latency.md"), report);
    // The smoke run (part of `pnpm test`) says one line; DUET_FIGURES=1 prints the table.
    if (smoke && process.env.DUET_FIGURES !== "1")
      process.stderr.write(
        `mcp-latency smoke: REST and MCP calls ran (figures: ${join(dir, "mcp-latency.md")}; DUET_FIGURES=1 prints them)\n`,
      );
    else process.stdout.write(report);
  } finally {
    await mcp.close().catch(() => undefined);
    await duet.stop();
    await redis.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
