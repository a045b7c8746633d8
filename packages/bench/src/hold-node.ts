// The floor under a waiting seat's memory: a bare server that only holds the seats'
// requests, for the scale run's `--bare http|express` (src/scale.ts). `GET /v1/stream`
// answers the same headers and first byte as duet's stream and holds the response open;
// `GET /v1/recv` is held 25 s and answered `{"messages":[]}`. No Redis, no rooms, no
// auth: what Node's HTTP server (socket, parser, request, response) and Express's
// per-request state cost alone, measured the same way as the duet nodes (node-metrics.ts).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import express from "express";
import { connectionCount, reportMetrics } from "./node-metrics.js";

const kind = process.argv[2] as "http" | "express";
const held = new Set<ServerResponse>();
const RECV_WAIT_MS = 25_000;

function hold(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? "";
  const ndjson = url.includes("format=ndjson");
  if (url.startsWith("/v1/stream")) {
    res.writeHead(200, {
      "content-type": ndjson ? "application/x-ndjson; charset=utf-8" : "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-store",
      "x-accel-buffering": "no",
      "content-encoding": "identity",
    });
    res.write(ndjson ? " " : ": duet stream\n\n");
    held.add(res);
    res.on("close", () => held.delete(res));
  } else if (url.startsWith("/v1/recv")) {
    held.add(res);
    const timer = setTimeout(() => {
      held.delete(res);
      const body = '{"messages":[]}';
      res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": body.length });
      res.end(body);
    }, RECV_WAIT_MS);
    res.on("close", () => {
      clearTimeout(timer);
      held.delete(res);
    });
  } else {
    res.writeHead(404);
    res.end();
  }
}

let handler: (req: IncomingMessage, res: ServerResponse) => void = hold;
if (kind === "express") {
  const app = express();
  app.set("etag", false);
  app.set("x-powered-by", false);
  app.get("/v1/stream", (req, res) => hold(req, res));
  app.get("/v1/recv", (req, res) => hold(req, res));
  handler = app;
}
const server = createServer({ keepAliveTimeout: 65_000 }, handler);
server.listen(0, "127.0.0.1", 4096, () => {
  const address = server.address() as { port: number };
  reportMetrics(async () => ({ waiting: held.size, connections: await connectionCount(server) }));
  process.on("message", (message: { type?: string }) => {
    if (message?.type === "stop") server.close(() => process.exit(0));
    if (message?.type === "stop") server.closeAllConnections();
  });
  process.on("disconnect", () => process.exit(0));
  process.send?.({ type: "ready", url: `http://127.0.0.1:${address.port}` });
});
