// How many calls a frugal agent makes per message it receives, when it folds its read
// receipts into the recv and send it makes anyway (docs/protocol.md, "Acks folded into recv
// and send"). An asker over raw HTTP sends a greeting and three questions, one at a time,
// then a goodbye, and closes once that is read; the answerer receives those five messages
// and sends three answers, over MCP (the official SDK client, counting tool calls) or raw
// HTTP (counting requests). Neither side ever calls ack. A recv that comes back empty at
// its wait cap would not count: none should here, the asker answers at once.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { USER_AGENT } from "@duet/protocol";
import { useTarget } from "../support/targets";

type Message = { id: string; from: string; text: string };
type RecvAnswer = { messages: Message[] } | { ended: string };

/** What the answerer calls, with each call counted by name. */
interface Seat {
  join(code: string): Promise<void>;
  recv(ack: string[]): Promise<RecvAnswer>;
  send(text: string, ack: string[]): Promise<string>;
  calls: Record<string, number>;
  emptyAtCap: number;
}

const count = (calls: Record<string, number>, name: string) => {
  calls[name] = (calls[name] ?? 0) + 1;
};

/** Raw HTTP with the recipe's requests; every request counted by its path. */
function httpSeat(base: string) {
  const calls: Record<string, number> = {};
  const seat = {
    calls,
    emptyAtCap: 0,
    token: "",
    code: "",
    async request(method: string, path: string, body?: unknown, query?: Record<string, string>) {
      count(calls, path.slice(4));
      const url = new URL(path, base);
      for (const [name, value] of Object.entries(query ?? {})) url.searchParams.set(name, value);
      const response = await fetch(url, {
        method,
        headers: {
          "user-agent": USER_AGENT,
          "content-type": "application/json",
          ...(seat.token ? { authorization: `Bearer ${seat.token}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as any };
    },
    async open() {
      const opened = await seat.request("POST", "/v1/open", {});
      seat.token = opened.body.token;
      seat.code = opened.body.code;
      return seat.code;
    },
    async join(code: string) {
      const joined = await seat.request("POST", "/v1/join", { code });
      seat.token = joined.body.token;
      seat.code = code;
    },
    async recv(ack: string[], wait = 10_000): Promise<RecvAnswer> {
      const query: Record<string, string> = { code: seat.code, wait: String(wait) };
      if (ack.length > 0) query.ack = ack.join(",");
      const answer = await seat.request("GET", "/v1/recv", undefined, query);
      if (answer.status === 404) return { ended: answer.body.ended?.reason ?? "gone" };
      expect(answer.status).toBe(200);
      if (answer.body.messages.length === 0) seat.emptyAtCap++;
      return answer.body;
    },
    async send(text: string, ack: string[]) {
      const sent = await seat.request("POST", "/v1/send", { code: seat.code, text, ...(ack.length ? { ack } : {}) });
      expect(sent.status).toBe(200);
      return sent.body.id as string;
    },
    async waitUntilRead(id: string) {
      for (;;) {
        const status = await seat.request("GET", "/v1/status", undefined, {
          code: seat.code,
          wait: "10000",
          until_read: id,
        });
        if (!status.body.unread.includes(id)) return;
      }
    },
    async close() {
      expect((await seat.request("POST", "/v1/close", { code: seat.code })).status).toBe(200);
    },
  };
  return seat;
}

/** The MCP tools through the official SDK client; every tools/call counted by tool name. */
async function mcpSeat(base: string): Promise<Seat & { close(): Promise<void> }> {
  const client = new Client({ name: "duet-frugal-peer", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", base)));
  const calls: Record<string, number> = {};
  let token = "";
  let code = "";
  const tool = async (name: string, args: Record<string, unknown>) => {
    count(calls, name);
    const result = await client.callTool({ name, arguments: args });
    const body = JSON.parse((result.content as { text: string }[])[0]!.text);
    return { error: result.isError === true, body };
  };
  const seat = {
    calls,
    emptyAtCap: 0,
    async join(given: string) {
      const joined = await tool("join", { code: given });
      token = joined.body.token;
      code = given;
    },
    async recv(ack: string[]): Promise<RecvAnswer> {
      // No wait: the tool's default is the relay's MCP cap.
      const answer = await tool("recv", { code, token, ...(ack.length ? { ack } : {}) });
      if (answer.error) {
        expect(answer.body.error).toBe("not_found");
        return { ended: answer.body.message };
      }
      if (answer.body.messages.length === 0) seat.emptyAtCap++;
      return answer.body;
    },
    async send(text: string, ack: string[]) {
      const sent = await tool("send", { code, token, text, ...(ack.length ? { ack } : {}) });
      expect(sent.error).toBe(false);
      return sent.body.id as string;
    },
    close: () => client.close(),
  };
  return seat;
}

/**
 * The answerer's loop: recv(ack = what the last recv gave and no send acked) -> think ->
 * send(answer, ack = what it answers), until the room ends. Returns the messages received.
 */
async function answer(seat: Seat): Promise<Message[]> {
  const received: Message[] = [];
  let unacked: string[] = [];
  for (;;) {
    const got = await seat.recv(unacked);
    if ("ended" in got) return received;
    received.push(...got.messages);
    unacked = got.messages.map((message) => message.id);
    const questions = got.messages.filter((message) => message.text.startsWith("Q"));
    if (questions.length === 0) continue;
    await seat.send(`answer to ${questions.map((q) => q.text).join(" and ")}`, unacked);
    unacked = [];
  }
}

/** The asker opens and sends a greeting and Q1 before the peer joins: the answerer's first recv gets both. */
async function openAndGreet(asker: ReturnType<typeof httpSeat>): Promise<string> {
  const code = await asker.open();
  await asker.send("hello, three questions for you", []);
  await asker.send("Q1", []);
  return code;
}

/** The asker, once the peer joined: a question per answer, then goodbye, and close once it is read. */
async function ask(asker: ReturnType<typeof httpSeat>): Promise<Message[]> {
  const answers: Message[] = [];
  let unacked: string[] = [];
  for (const next of ["Q2", "Q3", "thanks, bye"]) {
    let got: RecvAnswer;
    do got = await asker.recv(unacked, 10_000);
    while ("messages" in got && got.messages.length === 0);
    if ("ended" in got) throw new Error(`the room ended: ${got.ended}`);
    answers.push(...got.messages);
    unacked = got.messages.map((message) => message.id);
    const id = await asker.send(next, unacked);
    unacked = [];
    if (next === "thanks, bye") {
      await asker.waitUntilRead(id);
      await asker.close();
    }
  }
  return answers;
}

describe("calls per message received, acks folded into recv and send", () => {
  const target = useTarget("redis");

  const perMessage = (seat: Seat, received: number) => {
    const total = Object.values(seat.calls).reduce((sum, n) => sum + n, 0);
    // Recvs that came back empty at the wait cap do not count (none should here).
    return (total - seat.emptyAtCap) / received;
  };

  it("an MCP-only answerer: join 1, recv 5, send 3 for 5 messages received (1.8 calls each), no ack call", async () => {
    const base = target().nodes[0]!.url;
    const asker = httpSeat(base);
    const code = await openAndGreet(asker);
    const answerer = await mcpSeat(base);
    try {
      await answerer.join(code);
      const [asked, received] = await Promise.all([ask(asker), answer(answerer)]);
      expect(received.map((m) => m.text)).toEqual(["hello, three questions for you", "Q1", "Q2", "Q3", "thanks, bye"]);
      expect(asked.map((m) => m.text)).toEqual(["answer to Q1", "answer to Q2", "answer to Q3"]);
      expect(answerer.calls).toEqual({ join: 1, recv: 5, send: 3 });
      expect(answerer.emptyAtCap).toBe(0);
      expect(perMessage(answerer, received.length)).toBeLessThanOrEqual(2.0);
      // The asker over raw HTTP: no ack call either (its last answer is acked by the goodbye).
      expect(asker.calls.ack).toBeUndefined();
      process.stdout.write(
        `MCP answerer: ${JSON.stringify(answerer.calls)} for ${received.length} messages received: ${perMessage(answerer, received.length)} calls each\n` +
          `HTTP asker: ${JSON.stringify(asker.calls)}\n`,
      );
    } finally {
      await answerer.close();
    }
  });

  it("a raw-HTTP answerer makes the same calls", async () => {
    const base = target().nodes[0]!.url;
    const asker = httpSeat(base);
    const code = await openAndGreet(asker);
    const answerer = httpSeat(base);
    await answerer.join(code);
    const [, received] = await Promise.all([ask(asker), answer(answerer)]);
    expect(received).toHaveLength(5);
    expect(answerer.calls).toEqual({ join: 1, recv: 5, send: 3 });
    expect(perMessage(answerer, received.length)).toBeLessThanOrEqual(2.0);
    process.stdout.write(
      `HTTP answerer: ${JSON.stringify(answerer.calls)} for ${received.length} messages received: ${perMessage(answerer, received.length)} calls each\n`,
    );
  });
});
