#!/usr/bin/env node
// duet: the docker-compose topology from local binaries, as a foreground test harness.
//
//   node infra/local/topology.mjs [--replicas 3] [--port 0] [--max-seconds N] [--keep]
//
// Starts, in a fresh temporary directory:
//   - redis-server on a free loopback port, append-only (appendfsync everysec), noeviction;
//   - N relays: `node packages/server/dist/main.js` on free loopback ports (build first:
//     `pnpm -r build`), with REDIS_URL, TRUST_PROXY=1 and PUBLIC_URL like the compose file;
//   - nginx (Debian's package) with the SAME infra/nginx/nginx.conf: the directory holds a
//     symlink to it plus duet/listen.conf and duet/upstreams.conf written for these ports.
// Then prints one JSON line on stdout ({"msg":"topology ready","url":...}) and stays in
// the foreground until SIGINT/SIGTERM (or --max-seconds), when it stops everything it
// started and removes the directory (--keep leaves it, with every process's log).
// If nginx or redis-server is missing and we are root, it installs them with apt-get.
// Relay settings can be passed through the environment (e.g. ROOM_IDLE_SECONDS=60);
// REDIS_URL, REDIS_CLUSTER_NODES, HOST, PORT and PUBLIC_URL are always set here.
import { spawn, spawnSync } from "node:child_process";
import { accessSync, chmodSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const NGINX_CONF = join(ROOT, "infra/nginx/nginx.conf");
// DUET_TOPOLOGY_SERVER: another entry point to run as the relay (e.g. a stub while debugging nginx).
const SERVER_MAIN = resolve(process.env.DUET_TOPOLOGY_SERVER ?? join(ROOT, "packages/server/dist/main.js"));

const args = parseArgs(process.argv.slice(2));
const children = []; // { name, child, stopSignal }
let dir;
let stopping = false;

const log = (msg, extra = {}) => process.stderr.write(`[topology] ${msg}${Object.keys(extra).length ? " " + JSON.stringify(extra) : ""}\n`);

function parseArgs(argv) {
  const out = { replicas: 3, port: 0, maxSeconds: 0, keep: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${a} needs a value`);
      return v;
    };
    if (a === "--replicas") out.replicas = Number(next());
    else if (a === "--port") out.port = Number(next());
    else if (a === "--max-seconds") out.maxSeconds = Number(next());
    else if (a === "--keep") out.keep = true;
    else if (a === "-h" || a === "--help") usage();
    else usage(`unknown argument ${a}`);
  }
  if (!Number.isInteger(out.replicas) || out.replicas < 1 || out.replicas > 16) usage("--replicas must be 1..16");
  if (!Number.isInteger(out.port) || out.port < 0 || out.port > 65535) usage("--port must be 0..65535");
  if (!(out.maxSeconds >= 0)) usage("--max-seconds must be >= 0");
  return out;
}

function usage(problem) {
  if (problem) process.stderr.write(`topology: ${problem}\n`);
  process.stderr.write("usage: node infra/local/topology.mjs [--replicas N] [--port P] [--max-seconds S] [--keep]\n");
  process.exit(problem ? 2 : 0);
}

const which = (bin) =>
  [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/usr/local/sbin", "/sbin"]
    .filter(Boolean)
    .map((d) => join(d, bin))
    .find((p) => {
      try {
        accessSync(p, constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });

/** Finds a binary; installs its Debian package when missing and allowed (root, apt-get). */
function requireBinary(bin, debPackage) {
  const found = which(bin);
  if (found) return found;
  const canInstall = process.getuid?.() === 0 && which("apt-get") && process.env.DUET_TOPOLOGY_NO_INSTALL !== "1";
  if (!canInstall) throw new Error(`${bin} not found: install Debian's ${debPackage} package (apt-get install -y ${debPackage})`);
  log(`${bin} not found; installing ${debPackage} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => spawnSync("apt-get", ["install", "-y", "-q", "--no-install-recommends", debPackage], { stdio: ["ignore", "ignore", "inherit"], env, timeout: 300_000 });
  if (install().status !== 0) {
    spawnSync("apt-get", ["update", "-q"], { stdio: ["ignore", "ignore", "inherit"], env, timeout: 300_000 });
    if (install().status !== 0) throw new Error(`apt-get install ${debPackage} failed`);
  }
  const after = which(bin);
  if (!after) throw new Error(`${bin} still not found after installing ${debPackage}`);
  return after;
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const s = createServer().once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolvePort(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function redisPing(port) {
  return new Promise((resolvePing) => {
    const s = new Socket();
    const done = (ok) => {
      s.destroy();
      resolvePing(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once("error", () => done(false));
    s.connect(port, "127.0.0.1", () => s.write("PING\r\n"));
    s.once("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

async function httpOk(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000), headers: { "user-agent": "duet/0.1" } });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

async function waitFor(what, child, check, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}) while starting; see its log in ${dir}`);
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms; see its log in ${dir}`);
    await sleep(100);
  }
}

function start(name, cmd, argv, { env = process.env, logFile, stopSignal = "SIGTERM" }) {
  const out = openSync(join(dir, logFile), "a");
  const child = spawn(cmd, argv, { env, stdio: ["ignore", out, out], cwd: dir });
  children.push({ name, child, stopSignal });
  child.once("exit", (code, signal) => {
    if (!stopping) {
      log(`${name} exited unexpectedly`, { code, signal });
      void shutdown(1);
    }
  });
  return child;
}

function stopChild({ name, child, stopSignal }, graceMs) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const timer = setTimeout(() => {
      log(`${name} did not stop in ${graceMs} ms; SIGKILL`);
      child.kill("SIGKILL");
    }, graceMs);
    child.once("exit", () => {
      clearTimeout(timer);
      done();
    });
    child.kill(stopSignal);
  });
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  // Front to back: nginx, then the relays (they drain), then Redis.
  const byName = (prefix) => children.filter((c) => c.name.startsWith(prefix));
  await Promise.all(byName("nginx").map((c) => stopChild(c, 5000)));
  await Promise.all(byName("relay").map((c) => stopChild(c, 15000)));
  await Promise.all(byName("redis").map((c) => stopChild(c, 5000)));
  if (dir && !args.keep) rmSync(dir, { recursive: true, force: true });
  else if (dir) log(`kept ${dir}`);
  log("stopped");
  process.exit(code);
}

async function main() {
  if (!existsSync(SERVER_MAIN)) throw new Error(`${SERVER_MAIN} is missing: run \`pnpm -r build\` first`);
  const redisBin = requireBinary("redis-server", "redis-server");
  const nginxBin = requireBinary("nginx", "nginx");

  dir = mkdtempSync(join(tmpdir(), "duet-topology-"));
  chmodSync(dir, 0o755); // nginx workers (an unprivileged user) write temp files below it

  // Redis: append-only, like the compose file, in its own directory.
  const redisPort = await freePort();
  mkdirSync(join(dir, "redis"));
  const redis = start("redis", redisBin, [
    "--port", String(redisPort), "--bind", "127.0.0.1", "--dir", join(dir, "redis"),
    "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
    "--maxmemory-policy", "noeviction", "--daemonize", "no", "--protected-mode", "yes",
  ], { logFile: "redis.log" });
  await waitFor("redis-server", redis, () => redisPing(redisPort), 10_000);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;

  const nginxPort = args.port || (await freePort());
  const url = `http://127.0.0.1:${nginxPort}`;

  // Relays.
  const replicas = [];
  for (let i = 1; i <= args.replicas; i++) {
    const port = await freePort();
    const env = { ...process.env };
    // One way to reach Redis only (the relay refuses two): this harness's own REDIS_URL.
    for (const name of ["REDIS_CLUSTER_NODES", "REDIS_SENTINELS", "REDIS_SENTINEL_NAME", "REDIS_WRITE_ACK_REPLICAS"]) delete env[name];
    Object.assign(env, {
      HOST: "127.0.0.1",
      PORT: String(port),
      REDIS_URL: redisUrl,
      TRUST_PROXY: "1",
      PUBLIC_URL: url,
      SHUTDOWN_DRAIN_SECONDS: process.env.SHUTDOWN_DRAIN_SECONDS ?? "1",
      LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
      NODE_ENV: process.env.NODE_ENV ?? "production",
    });
    const name = `relay-${i}`;
    const child = start(name, process.execPath, [SERVER_MAIN], { env, logFile: `${name}.log` });
    replicas.push({ name, port, address: `127.0.0.1:${port}`, pid: child.pid, child });
  }
  await Promise.all(replicas.map((r) => waitFor(r.name, r.child, () => httpOk(`http://${r.address}/readyz`), 20_000)));

  // nginx: the repository's nginx.conf (symlinked, so relative includes resolve here).
  const prefix = join(dir, "nginx");
  mkdirSync(join(prefix, "conf/duet"), { recursive: true });
  symlinkSync(NGINX_CONF, join(prefix, "conf/nginx.conf"));
  writeFileSync(join(prefix, "conf/duet/listen.conf"), `# written by infra/local/topology.mjs\nlisten 127.0.0.1:${nginxPort};\n`);
  writeFileSync(
    join(prefix, "conf/duet/upstreams.conf"),
    `# written by infra/local/topology.mjs\n${replicas.map((r) => `server ${r.address} max_fails=3 fail_timeout=10s;`).join("\n")}\n`,
  );
  const nginxArgs = ["-p", `${prefix}/`, "-c", join(prefix, "conf/nginx.conf"), "-e", "stderr", "-g", `daemon off; pid ${join(prefix, "nginx.pid")};`];
  // stdout must be a file, not a socket: nginx opens /dev/stdout for the access log.
  const check = spawnSync(nginxBin, ["-t", "-q", ...nginxArgs], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "ignore", "pipe"] });
  if (check.status !== 0) throw new Error(`nginx -t failed:\n${check.stderr}`);
  // The access log goes to nginx's stdout (as in the container): here, a file.
  const accessLog = join(prefix, "access.log");
  const nginxOut = openSync(accessLog, "a");
  const nginxErr = openSync(join(prefix, "error.log"), "a");
  const nginx = spawn(nginxBin, nginxArgs, { stdio: ["ignore", nginxOut, nginxErr], cwd: prefix });
  children.push({ name: "nginx", child: nginx, stopSignal: "SIGQUIT" });
  nginx.once("exit", (code, signal) => {
    if (!stopping) {
      log("nginx exited unexpectedly", { code, signal });
      void shutdown(1);
    }
  });
  await waitFor("nginx", nginx, () => httpOk(`${url}/healthz`), 10_000);

  const ready = {
    msg: "topology ready",
    url,
    redis: redisUrl,
    replicas: replicas.map(({ name, port, address, pid }) => ({ name, port, address, pid })),
    nginx: { pid: nginx.pid, accessLog, errorLog: join(prefix, "error.log") },
    dir,
    pid: process.pid,
  };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
  log(`ready: ${url} (${replicas.length} relays, Redis ${redisUrl}); Ctrl-C stops everything`);
  if (args.maxSeconds > 0) setTimeout(() => (log(`--max-seconds ${args.maxSeconds} reached`), void shutdown(0)), args.maxSeconds * 1000).unref();
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => void shutdown(0));
process.on("uncaughtException", (err) => {
  log(`error: ${err.message}`);
  void shutdown(1);
});
// Keep the event loop alive while the topology runs.
const keepAlive = setInterval(() => {}, 1 << 30);
main().catch((err) => {
  log(`failed to start: ${err.message}`);
  clearInterval(keepAlive);
  args.keep = args.keep || Boolean(process.env.CI);
  void shutdown(1);
});
