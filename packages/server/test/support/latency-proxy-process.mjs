// A TCP proxy that delays every chunk by a fixed latency each way, as a process of its own:
// its delays run on its own event loop, so a test process held busy (its callers, the relay
// under test, every other CI lane) cannot stretch them into silence on the link. Spawned by
// startLatencyProxyProcess (tcp-proxy.ts). Prints "port <n>" once listening; ends with its parent.
//   node latency-proxy-process.mjs <target port> <latency ms>
import { createServer, Socket } from "node:net";

const [targetPort, latencyMs] = process.argv.slice(2).map(Number);
const forward = (from, to) => {
  const queue = [];
  let _timer;
  const pump = () => {
    _timer = undefined;
    while (queue.length > 0 && queue[0].at <= Date.now()) if (!to.destroyed) to.write(queue.shift().chunk);
    if (queue.length > 0) _timer = setTimeout(pump, queue[0].at - Date.now());
  };
  from.on("data", (chunk) => {
    queue.push({ at: Math.max(Date.now() + latencyMs, queue.at(-1)?.at ?? 0), chunk });
    _timer ??= setTimeout(pump, Math.max(0, queue[0].at - Date.now()));
  });
};
const server = createServer((client) => {
  const upstream = new Socket();
  const drop = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", drop).on("close", drop);
  upstream.on("error", drop).on("close", drop);
  upstream.connect(targetPort, "127.0.0.1");
  upstream.setNoDelay(true);
  client.setNoDelay(true);
  forward(client, upstream);
  forward(upstream, client);
});
server.listen(0, "127.0.0.1", () => process.stdout.write(`port ${server.address().port}\n`));
// The parent's end closes stdin: the proxy goes with it.
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
