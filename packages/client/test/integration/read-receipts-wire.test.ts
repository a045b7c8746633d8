// The CLI's read-receipt flows against a stand-in relay that speaks the receipts wire of
// docs/protocol.md §6.6 (status `unread`, status waits with until_read, the stream's `read`
// event), so each answer the CLI gets is scripted. read-receipts.test.ts runs the same flows
// against the real relay.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StateStore } from "../../src/cli/state";
import { runCli, startCli, temporaryDir } from "../support/processes";
import { statusBody } from "../support/replies";

jest.setTimeout(60_000);

const CODE = "k7dq-3mxa-9z2f";

/** Sends, status (with until_read waits), the stream and ack of one seat "a" whose peer acks when the test says. */
function standIn() {
  let nextId = 1;
  const unread: string[] = [];
  const statusQueries: Record<string, string>[] = [];
  const waiting = new Set<() => void>();
  const streams = new Set<ServerResponse>();
  const body = (req: IncomingMessage) =>
    new Promise<Record<string, unknown>>((resolve) => {
      let text = "";
      req.on("data", (chunk: Buffer) => (text += chunk.toString()));
      req.on("end", () => resolve(text ? JSON.parse(text) : {}));
    });
  const status = () => statusBody([...unread]);
  const answer = (res: ServerResponse, code: number, value: unknown) => {
    res.writeHead(code, { "content-type": "application/json" });
    res.end(JSON.stringify(value));
  };
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url!, "http://stand-in");
    if (req.method === "POST" && url.pathname === "/v1/send") {
      await body(req);
      const id = String(nextId++);
      unread.push(id);
      return answer(res, 200, { id });
    }
    if (req.method === "POST" && url.pathname === "/v1/ack") {
      const { ids } = (await body(req)) as { ids: string[] };
      return answer(res, 200, { ok: true, acked: ids.length });
    }
    if (url.pathname === "/v1/status") {
      const query = Object.fromEntries(url.searchParams);
      statusQueries.push(query);
      const until = query.until_read;
      const done = () => until === undefined || !unread.some((id) => Number(id) <= Number(until));
      if (done() || !query.wait) return answer(res, 200, status());
      const wake = () => {
        if (!done()) return;
        waiting.delete(wake);
        clearTimeout(timer);
        answer(res, 200, status());
      };
      const timer = setTimeout(() => {
        waiting.delete(wake);
        answer(res, 200, status());
      }, Number(query.wait));
      timer.unref();
      waiting.add(wake);
      return;
    }
    if (url.pathname === "/v1/stream") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(": duet stream\n\n");
      streams.add(res);
      res.on("close", () => streams.delete(res));
      return;
    }
    answer(res, 404, { error: "not_found", message: "No such endpoint." });
  });
  return {
    server,
    statusQueries,
    streamCount: () => streams.size,
    /** The peer acks these ids: they leave `unread`, status waits wake, streams get `read`. */
    peerReads(ids: string[]) {
      for (const id of ids) unread.splice(unread.indexOf(id), 1);
      for (const wake of [...waiting]) wake();
      for (const stream of streams) stream.write(`event: read\ndata: ${JSON.stringify({ ids })}\n\n`);
    },
    /** A message from the peer on every open stream. */
    peerSends(id: string, text: string) {
      for (const stream of streams)
        stream.write(`id: ${id}\nevent: message\ndata: ${JSON.stringify({ id, from: "b", text })}\n\n`);
    },
  };
}

describe("the CLI's receipts on the wire", () => {
  const relay = standIn();
  let url: string;
  let stateDir: string;
  beforeAll(async () => {
    await new Promise<void>((resolve) => relay.server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(relay.server.address() as AddressInfo).port}`;
    stateDir = temporaryDir("duet-receipts-wire-");
    new StateStore(stateDir).put({
      code: CODE,
      seat: "a",
      token: "tok",
      baseUrl: url,
      since: new Date().toISOString(),
    });
  });
  afterAll(async () => {
    relay.server.closeAllConnections();
    await new Promise((resolve) => relay.server.close(resolve));
  });
  const duet = (args: string[]) => runCli(args, { stateDir, url });
  const until = async (check: () => boolean) => {
    while (!check()) await new Promise((r) => setTimeout(r, 50));
  };

  it("send --wait-read: the id at once, exit 0 when the peer has read it", async () => {
    const sending = startCli(["send", "--wait-read", "hello"], { stateDir, url });
    expect(await sending.lines(1)).toEqual(["1"]);
    await until(() => relay.statusQueries.some((q) => q.until_read === "1"));
    expect(relay.statusQueries.at(-1)).toEqual({ code: CODE, wait: "25000", until_read: "1" });
    relay.peerReads(["1"]);
    const done = await sending.done;
    expect(done).toMatchObject({ code: 0, stdout: "1\n" });
    expect(done.stderr).toBe("Message 1 was read.\n");
  });

  it("wait --read last: the last id sent from this state file; at once when already read", async () => {
    const waited = await duet(["--json", "wait", "--read", "last"]);
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout)).toEqual({ code: CODE, id: "1", read: true, unread: [] });
    expect(await duet(["wait", "--read", "x1"])).toMatchObject({ code: 2 });
  });

  it("not read in time: exit 9, the id on stdout, the advice not to send again", async () => {
    // 5 s: long enough for the send itself on a busy machine (the timeout counts it too); the peer never reads.
    const late = await duet(["--json", "send", "--wait-read", "--timeout", "5000", "unread one"]);
    expect(late.code).toBe(9);
    expect(JSON.parse(late.stdout)).toEqual({ code: CODE, id: "2", read: false });
    expect(JSON.parse(late.stderr)).toMatchObject({ error: "timeout", exit_code: 9 });
    expect(JSON.parse(late.stderr).message).toContain("`duet wait --read 2` waits again; do not send it again.");
    const again = await duet(["wait", "--read", "last", "--timeout", "1000"]);
    expect(again.code).toBe(9);
    expect(again.stderr).toBe("duet: Message 2 was not read within 1000 ms.\n");
  });

  it("status shows the unread ids", async () => {
    expect((await duet(["status"])).stdout).toContain("unread:      2\n");
    expect(JSON.parse((await duet(["--json", "status"])).stdout).unread).toEqual(["2"]);
  });

  it("watch prints the receipts its stream carries, between the messages", async () => {
    const watching = startCli(["watch", "--count", "1"], { stateDir, url });
    await until(() => relay.streamCount() === 1);
    relay.peerReads(["2"]);
    relay.peerSends("9", "reply");
    expect(await watching.lines(2)).toEqual(["read: 2", "b: reply"]);
    expect((await watching.done).code).toBe(0);
    const json = startCli(["--json", "watch", "--count", "1"], { stateDir, url });
    await until(() => relay.streamCount() === 1);
    relay.peerReads(["3", "4"]);
    relay.peerSends("10", "again");
    expect((await json.lines(2)).map((line) => JSON.parse(line))).toEqual([
      { event: "read", ids: ["3", "4"] },
      { id: "10", from: "b", text: "again" },
    ]);
    expect((await json.done).code).toBe(0);
  });
});
