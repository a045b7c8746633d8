#!/usr/bin/env node
// duet: the docker-compose topology from local binaries, as a foreground test harness.
//
//   node infra/local/topology.mjs [--replicas 3] [--port 0] [--max-seconds N] [--keep]
//
// Starts, in a fresh temporary directory:
//   - redis-server on a loopback port, append-only (appendfsync everysec), noeviction;
//   - N relays: `node packages/server/dist/main.js` on port 0 (build first: `pnpm -r build`),
//     each reporting the port it bound, with REDIS_URL, TRUST_PROXY=1 and PUBLIC_URL like
//     the compose file;
//   - nginx (Debian's package) with the SAME infra/nginx/nginx.conf: the directory holds a
//     symlink to it plus duet/listen.conf and duet/upstreams.conf written for these ports.
// No port is picked, released and bound later by someone else: the relays bind port 0
// themselves; redis-server and nginx, which cannot report a port, bind a candidate port
// themselves (retrying another when it is taken) and are then checked to be the process
// answering there (redis: the pid in INFO server; nginx: the request id it answered with
// appears in its own access log).
// Then prints one JSON line on stdout ({"msg":"topology ready","url":...}) and stays in
// the foreground until SIGINT/SIGTERM (or --max-seconds, or its parent process exits),
// when it stops everything it started and removes the directory (--keep leaves it, with
// every process's log).
// nginx and redis-server must be installed (node infra/scripts/test-prerequisites.mjs does it).
// Relay settings can be passed through the environment (e.g. ROOM_IDLE_SECONDS=60);
// REDIS_URL, REDIS_CLUSTER_NODES, HOST, PORT and PUBLIC_URL are always set here, and
// LOG_LEVEL is at least info (a relay reports its port in its "listening" line).
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
// The built testkit: which(), the relay as a process (spawnRelay), Redis's INFO.
const TESTKIT = join(ROOT, "packages/testkit/dist/index.js");
const { redisInfo, spawnRelay, which } = await import(TESTKIT).catch(() => {
  process.stderr.write(`topology: ${TESTKIT} is missing: run \`pnpm -r build\` first\n`);
  process.exit(2);
});
const NGINX_CONF = join(ROOT, "infra/nginx/nginx.conf");
// DUET_TOPOLOGY_SERVER: another entry point to run as the relay (e.g. a stub while debugging nginx).
const SERVER_MAIN = resolve(process.env.DUET_TOPOLOGY_SERVER ?? join(ROOT, "packages/server/dist/main.js"));

const args = readArgs(process.argv.slice(2));
const children = []; // { name, child, stopSignal }
let dir;
let stopping = false;

const log = (msg, extra = {}) =>
  process.stderr.write(`[topology] ${msg}${Object.keys(extra).length ? ` ${JSON.stringify(extra)}` : ""}\n`);

function readArgs(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        replicas: { type: "string", default: "3" },
        port: { type: "string", default: "0" },
        "max-seconds": { type: "string", default: "0" },
        keep: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (err) {
    usage(err.message);
  }
  if (values.help) usage();
  const out = {
    replicas: Number(values.replicas),
    port: Number(values.port),
    maxSeconds: Number(values["max-seconds"]),
    keep: values.keep,
  };
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

/** Finds a binary, or says how to get it. */
function requireBinary(bin, debPackage) {
  const found = which(bin);
  if (found) return found;
  throw new Error(
    `${bin} not found: run \`node infra/scripts/test-prerequisites.mjs\` (or apt-get install -y ${debPackage})`,
  );
}

/**
 * A candidate port for a server that binds it itself (redis-server, nginx): below Linux's
 * ephemeral range (32768-60999), so outgoing connections and listen(0) never take it.
 * Only a candidate: the server's own bind and an identity check decide.
 */
const candidatePort = () => 20_000 + Math.floor(Math.random() * 12_000);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const exited = (child) => child.exitCode !== null || child.signalCode !== null;

async function waitFor(what, child, check, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (exited(child))
      throw Object.assign(
        new Error(`${what} exited (${child.exitCode ?? child.signalCode}) while starting; its log is printed below`),
        { exited: true },
      );
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms; its log is printed below`);
    await sleep(100);
  }
}

/**
 * Spawns a child whose output goes to logFile (or to `stdio` when given). Once `ready` is
 * called, its exit is unexpected and stops the topology; before that, whoever started it
 * decides (a server that could not bind its port is retried on another).
 */
function start(name, cmd, argv, { env = process.env, logFile, stdio, stopSignal = "SIGTERM" }) {
  let out;
  if (!stdio) {
    out = openSync(join(dir, logFile), "a");
    stdio = ["ignore", out, out];
  }
  return track(name, spawn(cmd, argv, { env, stdio, cwd: dir }), stopSignal);
}

/** Adds a child to those the topology stops; once `ready` is called, its exit stops the topology. */
function track(name, child, stopSignal) {
  const entry = { name, child, stopSignal, ready: false };
  children.push(entry);
  child.once("exit", (code, signal) => {
    if (!stopping && entry.ready) {
      log(`${name} exited unexpectedly`, { code, signal });
      void shutdown(1);
    }
  });
  return {
    child,
    ready: () => {
      entry.ready = true;
    },
  };
}

/**
 * Runs attempt(port) on candidate ports until one succeeds; an attempt fails over to the
 * next candidate only when its server exited (it could not bind). A fixed port gets one try.
 */
async function onOwnPort(what, fixedPort, attempt) {
  for (let tries = 1; ; tries++) {
    const port = fixedPort || candidatePort();
    try {
      return await attempt(port);
    } catch (err) {
      if (!err.exited || fixedPort || tries >= 10) throw err;
      log(`${what} could not start on port ${port} (taken?); trying another`);
    }
  }
}

async function startRedis(redisBin) {
  mkdirSync(join(dir, "redis"));
  return onOwnPort("redis-server", 0, async (port) => {
    const { child, ready } = start(
      "redis",
      redisBin,
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        join(dir, "redis"),
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--maxmemory-policy",
        "noeviction",
        "--daemonize",
        "no",
        "--protected-mode",
        "yes",
      ],
      { logFile: "redis.log" },
    );
    // Ready only when the server on this port is the process we spawned.
    await waitFor("redis-server", child, async () => Number((await redisInfo(port))?.process_id) === child.pid, 10_000);
    ready();
    return port;
  });
}

/** A relay on port 0: its own "listening" log line says which port it bound (testkit's spawnRelay). */
async function startRelay(name, env) {
  const logStream = createWriteStream(join(dir, `${name}.log`), { flags: "a" });
  const relay = await spawnRelay({
    main: SERVER_MAIN,
    env: { ...env, HOST: "127.0.0.1" },
    cwd: dir,
    keepOutput: false,
    onOutput: (chunk) => logStream.write(chunk),
  }).catch((err) => {
    throw new Error(`${name}: ${err.message.split("\n")[0]}; its log is printed below`);
  });
  track(name, relay.child, "SIGTERM").ready();
  const address = new URL(relay.url).host;
  // Its /metrics listener (METRICS_PORT, port 0 here): the public port answers /metrics 404.
  const metricsAddress = relay.metricsUrl ? new URL(relay.metricsUrl).host : undefined;
  return { name, port: relay.port, address, metricsAddress, pid: relay.child.pid, child: relay.child };
}

/** The relay at this address (which it reported itself) says it is ready. */
async function relayReady(address) {
  try {
    const res = await fetch(`http://${address}/readyz`, {
      signal: AbortSignal.timeout(1000),
      headers: { "user-agent": "duet/0.1" },
    });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/**
 * Whether our nginx answers on url: /healthz is 200 with a request id, and that id is in
 * this nginx's own access log (any other server on the port fails one or the other).
 */
async function nginxAnswers(url, accessLog) {
  try {
    const res = await fetch(`${url}/healthz`, {
      signal: AbortSignal.timeout(1000),
      headers: { "user-agent": "duet/0.1" },
    });
    await res.arrayBuffer();
    const id = res.headers.get("x-request-id") ?? "";
    if (res.status !== 200 || !/^[0-9a-f]{32}$/.test(id)) return false;
    for (let i = 0; i < 20; i++) {
      if (existsSync(accessLog) && readFileSync(accessLog, "utf8").includes(`"request_id":"${id}"`)) return true;
      await sleep(50);
    }
    return false;
  } catch {
    return false;
  }
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

/** On failure, the end of every log goes to stderr (the directory is removed unless --keep). */
function dumpLogs() {
  for (const file of new Set([
    "redis.log",
    ...children.filter((c) => c.name.startsWith("relay")).map((c) => `${c.name}.log`),
    "nginx/error.log",
  ])) {
    const path = join(dir, file);
    if (!existsSync(path)) continue;
    const lines = readFileSync(path, "utf8").trimEnd().split("\n").slice(-15);
    process.stderr.write(`--- ${file} (last ${lines.length} lines)\n${lines.join("\n")}\n`);
  }
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  // Front to back: nginx, then the relays (they drain), then Redis.
  const byName = (prefix) => children.filter((c) => c.name.startsWith(prefix));
  await Promise.all(byName("nginx").map((c) => stopChild(c, 5000)));
  await Promise.all(byName("relay").map((c) => stopChild(c, 15000)));
  await Promise.all(byName("redis").map((c) => stopChild(c, 5000)));
  if (dir && code !== 0) dumpLogs();
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
  const redisPort = await startRedis(redisBin);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;

  // nginx needs the relays' addresses, and the relays need nginx's URL (PUBLIC_URL, in the
  // links they hand out): the relays start for a candidate nginx port; if nginx cannot
  // bind it, they are stopped and everything front of Redis starts again on another.
  const prefix = join(dir, "nginx");
  mkdirSync(join(prefix, "conf/duet"), { recursive: true });
  // The repository's nginx.conf, symlinked so its relative includes resolve here.
  symlinkSync(NGINX_CONF, join(prefix, "conf/nginx.conf"));
  const nginxArgs = [
    "-p",
    `${prefix}/`,
    "-c",
    join(prefix, "conf/nginx.conf"),
    "-e",
    "stderr",
    "-g",
    `daemon off; pid ${join(prefix, "nginx.pid")};`,
  ];
  // The access log goes to nginx's stdout (as in the container): here, a file (not a
  // socket: nginx opens /dev/stdout for it).
  const accessLog = join(prefix, "access.log");
  const { url, replicas, nginx } = await onOwnPort("nginx", args.port, async (nginxPort) => {
    const url = `http://127.0.0.1:${nginxPort}`;
    const env = { ...process.env };
    // One way to reach Redis only (the relay refuses two): this harness's own REDIS_URL.
    for (const name of ["REDIS_CLUSTER_NODES", "REDIS_SENTINELS", "REDIS_SENTINEL_NAME", "REDIS_WRITE_ACK_REPLICAS"])
      delete env[name];
    Object.assign(env, {
      REDIS_URL: redisUrl,
      TRUST_PROXY: "1",
      PUBLIC_URL: url,
      SHUTDOWN_DRAIN_SECONDS: process.env.SHUTDOWN_DRAIN_SECONDS ?? "1",
      // The relays report their port in the "listening" line, logged at info.
      LOG_LEVEL: ["trace", "debug"].includes(process.env.LOG_LEVEL) ? process.env.LOG_LEVEL : "info",
      NODE_ENV: process.env.NODE_ENV ?? "production",
    });
    const replicas = await Promise.all(
      Array.from({ length: args.replicas }, (_, i) => startRelay(`relay-${i + 1}`, env)),
    );
    await Promise.all(replicas.map((r) => waitFor(r.name, r.child, () => relayReady(r.address), 20_000)));
    writeFileSync(
      join(prefix, "conf/duet/listen.conf"),
      `# written by infra/local/topology.mjs\nlisten 127.0.0.1:${nginxPort};\n`,
    );
    writeFileSync(
      join(prefix, "conf/duet/upstreams.conf"),
      `# written by infra/local/topology.mjs\n${replicas.map((r) => `server ${r.address} max_fails=3 fail_timeout=10s;`).join("\n")}\n`,
    );
    const check = spawnSync(nginxBin, ["-t", "-q", ...nginxArgs], {
      encoding: "utf8",
      timeout: 10_000,
      stdio: ["ignore", "ignore", "pipe"],
    });
    if (check.status !== 0) throw new Error(`nginx -t failed:\n${check.stderr}`);
    const nginx = start("nginx", nginxBin, nginxArgs, {
      stdio: ["ignore", openSync(accessLog, "a"), openSync(join(prefix, "error.log"), "a")],
      stopSignal: "SIGQUIT",
    });
    try {
      await waitFor("nginx", nginx.child, () => nginxAnswers(url, accessLog), 10_000);
    } catch (err) {
      if (err.exited) {
        const relays = children.filter((c) => c.name.startsWith("relay") && !exited(c.child));
        for (const c of relays) c.ready = false; // their exit is expected now
        await Promise.all(relays.map((c) => stopChild(c, 15000)));
      }
      throw err;
    }
    nginx.ready();
    return { url, replicas, nginx: nginx.child };
  });

  const ready = {
    msg: "topology ready",
    url,
    redis: redisUrl,
    replicas: replicas.map(({ name, port, address, metricsAddress, pid }) => ({
      name,
      port,
      address,
      metricsAddress,
      pid,
    })),
    nginx: { pid: nginx.pid, accessLog, errorLog: join(prefix, "error.log") },
    dir,
    pid: process.pid,
  };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
  log(`ready: ${url} (${replicas.length} relays, Redis ${redisUrl}); Ctrl-C stops everything`);
  if (args.maxSeconds > 0)
    setTimeout(() => {
      log(`--max-seconds ${args.maxSeconds} reached`);
      void shutdown(0);
    }, args.maxSeconds * 1000).unref();
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => void shutdown(0));
// A parent that is gone leaves stdout and stderr without a reader: a write fails (EPIPE),
// and an 'error' with no listener comes back through uncaughtException, whose log writes
// again and fails again on the next tick, a loop that starves every timer (shutdown's too)
// and spins a core for ever. What nobody can read any more is dropped.
for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
// Whoever started us is gone (a test runner killed, a terminal closed): stop too, rather
// than run on as an orphan until --max-seconds.
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid) {
    log(`parent process ${parentPid} is gone`);
    void shutdown(0);
  }
}, 500).unref();
process.on("uncaughtException", (err) => {
  log(`error: ${err.message}`);
  void shutdown(1);
});
// Keep the event loop alive while the topology runs.
const keepAlive = setInterval(() => {}, 1 << 30);
main().catch((err) => {
  log(`failed to start: ${err.message}`);
  clearInterval(keepAlive);
  void shutdown(1);
});
