// `duet doctor` end to end: against the relay itself (nothing between: the stream and the
// full wait), and through a proxy that buffers whole answers and cuts requests after 3 s,
// the two faults the self-test exists to find.
import { request as httpRequest, createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { runCli, startRelay, temporaryDir, type RelayProcess } from "../support/processes";

jest.setTimeout(120_000);

/** A proxy that reads each whole answer before passing it on, and answers 504 to any request that takes over `cutMs`. */
async function badProxy(target: string, cutMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const upstream = new URL(target);
  const server: Server = createServer((req, res) => {
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on("data", (chunk: Buffer) => chunks.push(chunk));
        answer.on("end", () => {
          clearTimeout(cut);
          if (res.headersSent) return;
          const { "content-length": _length, "transfer-encoding": _encoding, ...headers } = answer.headers;
          res.writeHead(answer.statusCode ?? 502, headers);
          res.end(Buffer.concat(chunks));
        });
      },
    );
    const cut = setTimeout(() => {
      forwarded.destroy();
      res.writeHead(504, { "content-type": "text/html" });
      res.end("<html><body>504 Gateway Time-out</body></html>");
    }, cutMs);
    forwarded.on("error", () => undefined);
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("duet doctor", () => {
  let relay: RelayProcess;
  beforeAll(async () => {
    relay = await startRelay();
  });
  afterAll(async () => relay.stop());

  it("straight to the relay: the long-poll survives, the ticks arrive as sent, use the stream", async () => {
    const stateDir = temporaryDir("duet-doctor-");
    const result = await runCli(["--json", "doctor", "--wait", "3000"], { stateDir, url: relay.url });
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report).toMatchObject({
      baseUrl: relay.url,
      longPoll: { waitMs: 3000, survived: true },
      stream: { ticks: 5, buffered: false },
      advice: { transport: "stream", waitMs: 3000 },
    });
    const text = await runCli(["doctor", "--wait", "1000"], { stateDir, url: relay.url });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^relay: {5}http/);
    expect(text.stdout).toContain("events arrive unbuffered");
    expect(text.stdout).toContain("advice:    use the stream");
  });

  it("through a proxy that buffers and cuts at 3 s: use long-poll, with a wait below the cut", async () => {
    const proxy = await badProxy(relay.url, 3000);
    try {
      const stateDir = temporaryDir("duet-doctor-proxy-");
      const result = await runCli(["--json", "doctor"], { stateDir, url: proxy.url });
      expect(result.code).toBe(0);
      const report = JSON.parse(result.stdout);
      expect(report.longPoll).toMatchObject({ waitMs: 25_000, survived: false, failure: { code: "unavailable" } });
      expect(report.advice.transport).toBe("long-poll");
      expect(report.advice.waitMs).toBeLessThan(3000);
      // The stream was cut too (it lasts 5 s) or came as one lump: either way not a stream.
      expect(report.stream.failure !== undefined || report.stream.buffered).toBe(true);
      const text = await runCli(["doctor"], { stateDir, url: proxy.url });
      expect(text.stdout).toContain("something between cuts long requests");
      expect(text.stdout).toMatch(/advice: {4}use long-poll: `duet watch --long-poll --wait \d+`/);
    } finally {
      await proxy.close();
    }
  });

  it("an address without the self-test (not a duet relay) is named as such (exit 4), not diagnosed", async () => {
    const old = createServer((_req, res) => {
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":"not_found","message":"No such endpoint. The API is described at GET /v1/api."}');
    });
    await new Promise<void>((resolve) => old.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(old.address() as AddressInfo).port}`;
      const result = await runCli(["doctor", "--wait", "0"], { stateDir: temporaryDir("duet-doctor-old-"), url });
      expect(result.code).toBe(4);
      expect(result.stderr).toMatch(
        /^duet: The relay at http:\S+ has no self-test \(GET \/v1\/selftest answered 404\)/,
      );
    } finally {
      old.close();
    }
  });
});
