// The container path for real: the repository's own docker-compose.yml with its monitoring
// profile, built and started on a real Docker engine (`docker compose --profile monitoring
// up --build --wait`), then used through nginx on the published loopback port as an
// operator and an agent would, and watched through the profile's Prometheus. The base images are local
// stand-ins where Docker Hub is out of reach (docker/docker-env.sh; same names, test-only).
//
// One compose project per run (its own name, volume, image tag and an ephemeral host port);
// everything it made is removed afterwards except the stand-in base images, which later
// runs reuse. The relays' last-resort re-read comes every WAKE_RECHECK_SECONDS (150 s), so a
// prompt wake-up across containers can only come from Redis pub/sub.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { type Socket, connect } from "node:net";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { DuetClient, type SeatCredentials, type WaitEvent } from "@duet/client";
import { ERROR_CODES, USER_AGENT } from "@duet/protocol";
import { figures } from "./support/figures";
import { dockerReady } from "./support/docker-setup";

const run = promisify(execFile);
const ROOT = resolve(__dirname, "../../..");
const PROJECT = `duet-test-${process.pid}`;
const IMAGE = `duet-relay:test-${process.pid}`;
const ENV = {
  ...process.env,
  DUET_PORT: "0",
  DUET_PROMETHEUS_PORT: "0",
  DUET_IMAGE: IMAGE,
  COMPOSE_PROGRESS: "quiet",
};
// With the monitoring profile: Prometheus beside the stack, as docs/metrics.md tells operators.
const COMPOSE = ["compose", "-p", PROJECT, "-f", "docker-compose.yml", "--profile", "monitoring"];
const RELAYS = ["relay-1", "relay-2", "relay-3"] as const;

/** Every secret and text this file sends: none may appear in any container's log. */
const secrets = new Set<string>();
let baseUrl = "";
let client: DuetClient;

async function compose(args: string[], timeoutMs = 120_000): Promise<string> {
  try {
    const { stdout } = await run("docker", [...COMPOSE, ...args], {
      cwd: ROOT,
      env: ENV,
      timeout: timeoutMs,
      maxBuffer: 64 << 20,
    });
    return stdout;
  } catch (e) {
    const err = e as { stderr?: string; stdout?: string; message: string };
    throw new Error(`docker compose ${args.join(" ")} failed: ${err.message}\n${err.stderr ?? ""}${err.stdout ?? ""}`);
  }
}

const seconds = (startedMs: number) => Math.round((Date.now() - startedMs) / 100) / 10;

async function publishedUrl(): Promise<string> {
  const hostPort = (await compose(["port", "nginx", "8080"])).trim(); // 127.0.0.1:NNNNN
  return `http://${hostPort}`;
}

async function up(build: boolean): Promise<number> {
  const started = Date.now();
  await compose(["up", ...(build ? ["--build"] : []), "--wait", "--quiet-pull"], 600_000);
  const took = seconds(started);
  baseUrl = await publishedUrl();
  client = new DuetClient({ baseUrl, retryTimeoutMs: 60_000 });
  return took;
}

/** Runs a one-line Node script inside a relay container (its own 127.0.0.1:8080, metrics on 9464). */
async function inRelay(relay: string, script: string, env: Record<string, string> = {}): Promise<string> {
  const envArgs = Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  return compose(["exec", "-T", ...envArgs, relay, "node", "-e", script], 60_000);
}

async function waitingRecvs(relay: string): Promise<number> {
  const metrics = await inRelay(
    relay,
    "fetch('http://127.0.0.1:9464/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
  );
  const line = metrics.split("\n").find((l) => l.startsWith("duet_recv_waiting "));
  return Number(line?.split(" ")[1] ?? NaN);
}

async function openPair(): Promise<{ a: SeatCredentials; b: SeatCredentials }> {
  const opened = await client.open();
  const joined = await client.join(opened.code);
  secrets.add(opened.token).add(joined.token);
  return { a: { code: opened.code, token: opened.token }, b: { code: opened.code, token: joined.token } };
}

async function inspect(container: string): Promise<any> {
  const { stdout } = await run("docker", ["inspect", container], { env: ENV });
  return JSON.parse(stdout)[0];
}

async function containerOf(service: string): Promise<string> {
  return (await compose(["ps", "-a", "-q", service])).trim();
}

beforeAll(async () => {
  // The engine the global setup is bringing up (each step it took, in one line each).
  process.stderr.write(await dockerReady());
  await compose(["down", "-v", "--remove-orphans"]).catch(() => undefined); // a leftover of a killed run
  const took = await up(true);
  figures.record("compose", "up --build --wait to healthy (s)", took);
}, 660_000);

// Each test starts from the whole stack running, whatever the one before it stopped.
// (Compose 2.26 recreates containers on the first plain `up` after `up --build`, and a
// recreated nginx gets a new ephemeral host port: read it each time.)
beforeEach(async () => {
  await up(false);
}, 200_000);

afterAll(async () => {
  await compose(["down", "-v", "--remove-orphans", "--timeout", "60"], 180_000).catch((e) => console.error(String(e)));
  await run("docker", ["image", "rm", "-f", IMAGE], { env: ENV }).catch(() => undefined);
}, 200_000);

test("relays run as uid 1000 on a read-only root file system with a writable /tmp", async () => {
  for (const relay of RELAYS) {
    const info = await inspect(await containerOf(relay));
    expect({ relay, user: info.Config.User, readOnly: info.HostConfig.ReadonlyRootfs }).toEqual({
      relay,
      user: "1000:1000",
      readOnly: true,
    });
  }
  const probe = await compose([
    "exec",
    "-T",
    "relay-1",
    "sh",
    "-c",
    "id -u; touch /app/x 2>/dev/null && echo app-writable || echo app-read-only; touch /tmp/x && echo tmp-writable",
  ]);
  expect(probe.trim().split("\n")).toEqual(["1000", "app-read-only", "tmp-writable"]);
  // No package manager and no sources in the runtime image.
  const contents = await compose([
    "exec",
    "-T",
    "relay-1",
    "sh",
    "-c",
    "command -v pnpm || echo no-pnpm; ls /app/packages/server",
  ]);
  expect(contents).toContain("no-pnpm");
  expect(contents).not.toMatch(/\bsrc\b/);
}, 60_000);

test("a whole exchange through nginx on the published port", async () => {
  const { a, b } = await openPair();
  const text = `compose exchange ${process.pid}`;
  secrets.add(text);
  const sent = await client.send(a, text);
  const got = await client.recv(b, { waitMs: 0 });
  expect(got.messages).toEqual([{ id: sent.id, from: "a", text }]);
  expect(await client.ack(b, [sent.id])).toEqual({ ok: true, acked: 1 });
  expect(await client.status(a)).toMatchObject({ pending_in: 0, pending_out: 0 });
  expect(await client.close(a)).toEqual({ ok: true });
  // Each replica reads the tally at most once per STATS_CACHE_MS (docs/protocol.md, stats), and
  // Prometheus's scrapes read it too, so the room can take a second to show: ask until it does.
  let sessions = 0;
  for (let tries = 0; tries < 40 && sessions < 1; tries++) {
    if (tries > 0) await new Promise((r) => setTimeout(r, 250));
    sessions = ((await fetch(`${baseUrl}/v1/stats`).then((r) => r.json())) as { sessions: number }).sessions;
  }
  expect(sessions).toBeGreaterThanOrEqual(1);
  // The landing page and the single-file CLI the image carries, for agents on other machines.
  const landing = await fetch(`${baseUrl}/`);
  expect(landing.status).toBe(200);
  expect(await landing.text()).toContain("/v1/api");
  const cli = await fetch(`${baseUrl}/v1/cli/duet.cjs`);
  expect({ status: cli.status, type: cli.headers.get("content-type") }).toEqual({
    status: 200,
    type: "text/javascript; charset=utf-8",
  });
  expect((await cli.text()).startsWith("#!/usr/bin/env node")).toBe(true);
  // nginx does not route /metrics, and the relays answer it 404 on their public port: each
  // serves it on its metrics listener (9464), which nothing publishes.
  expect((await fetch(`${baseUrl}/metrics`, { headers: { "user-agent": USER_AGENT } })).status).toBe(404);
}, 60_000);

test("the monitoring profile: Prometheus finds every relay by DNS and scrapes its /metrics", async () => {
  const prometheus = `http://${(await compose(["port", "prometheus", "9090"])).trim()}`;
  const query = async (expr: string) => {
    const reply = (await (
      await fetch(`${prometheus}/api/v1/query?${new URLSearchParams({ query: expr })}`)
    ).json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
    expect(reply.status).toBe("success");
    return reply.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  };
  // The relays' metrics listeners on the compose network, as Docker's DNS gives them for "relay".
  const addresses = await Promise.all(
    RELAYS.map(async (relay) => {
      const networks = (await inspect(await containerOf(relay))).NetworkSettings.Networks;
      return `${(Object.values(networks)[0] as { IPAddress: string }).IPAddress}:9464`;
    }),
  );
  // The first scrapes come within one scrape interval (10 s); the deadline only guards a hang.
  let up: { metric: Record<string, string>; value: number }[] = [];
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 1000))) {
    up = await query('up{job="duet"}');
    if (up.length === 3 && up.every((s) => s.value === 1)) break;
  }
  expect(Object.fromEntries(up.map((s) => [s.metric.instance, s.value]))).toEqual(
    Object.fromEntries(addresses.map((a) => [a, 1])),
  );
  // What the dashboard reads is there: every error code of every relay, from start-up.
  expect((await query('count(duet_errors_total{job="duet"})')).map((s) => s.value)).toEqual([3 * ERROR_CODES.length]);
}, 90_000);

test("a recv waiting on relay-1 is woken by a send through relay-2 (Redis pub/sub between containers)", async () => {
  const { a, b } = await openPair();
  const text = `across replicas ${process.pid}`;
  secrets.add(text);
  const recvScript =
    "fetch('http://127.0.0.1:8080/v1/recv?wait=20000&code='+encodeURIComponent(process.env.CODE),{headers:{authorization:'Bearer '+process.env.TOKEN,'user-agent':'duet/0.1'}})" +
    ".then(async r=>process.stdout.write(JSON.stringify({status:r.status,body:await r.json()})))";
  const started = Date.now();
  const recv = inRelay("relay-1", recvScript, { CODE: b.code, TOKEN: b.token });
  // Send only once the recv is held on relay-1, so the wake-up must cross containers.
  for (let i = 0; (await waitingRecvs("relay-1")) < 1; i++) {
    if (i > 50) throw new Error("the recv never started waiting on relay-1");
  }
  const sendScript =
    "fetch('http://127.0.0.1:8080/v1/send',{method:'POST',headers:{authorization:'Bearer '+process.env.TOKEN,'user-agent':'duet/0.1','content-type':'application/json'},body:JSON.stringify({code:process.env.CODE,text:process.env.TEXT})})" +
    ".then(async r=>process.stdout.write(JSON.stringify({status:r.status,body:await r.json()})))";
  const sent = JSON.parse(await inRelay("relay-2", sendScript, { CODE: a.code, TOKEN: a.token, TEXT: text }));
  expect(sent.status).toBe(200);
  const woken = JSON.parse(await recv);
  const tookMs = Date.now() - started;
  expect(woken).toEqual({ status: 200, body: { messages: [{ id: sent.body.id, from: "a", text }] } });
  // The last-resort re-read runs every 150 s: an answer long before the 20 s wait ended can
  // only have come from the wake-up.
  expect(tookMs).toBeLessThan(20_000);
  await client.close(a, { force: true });
}, 90_000);

test("`docker compose stop relay-2` under traffic costs clients only retried errors: every message arrives once", async () => {
  const waits: WaitEvent[] = [];
  const onWait = (e: WaitEvent) => waits.push(e);
  // Two rooms, a message every 300 ms each: well inside the per-address rate limit (600 a
  // minute), which every call of this file shares.
  const pairs = await Promise.all([0, 1].map(() => openPair()));
  let stop = false;
  const delivered = pairs.map(() => [] as string[]);
  const loops = pairs.map(async ({ a, b }, room) => {
    for (let i = 0; !stop; i++) {
      const text = `room ${room} message ${i}`;
      const sent = await client.send(a, text, { idempotencyKey: `k-${room}-${i}`, onWait });
      for (;;) {
        const { messages } = await client.recv(b, { waitMs: 5000, onWait });
        const mine = messages.find((m) => m.id === sent.id);
        if (mine) {
          delivered[room]!.push(mine.text);
          await client.ack(b, [sent.id], { onWait });
          break;
        }
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  });
  const loopsDone = Promise.all(loops);
  await new Promise((r) => setTimeout(r, 1000)); // traffic on three replicas
  const started = Date.now();
  let stopSeconds = NaN;
  try {
    await compose(["stop", "relay-2"], 90_000);
    stopSeconds = seconds(started);
    await new Promise((r) => setTimeout(r, 2000)); // traffic on two replicas for a moment
  } finally {
    stop = true;
    await loopsDone.catch(() => undefined);
  }
  await loopsDone;
  for (const [room, texts] of delivered.entries()) {
    expect(texts.length).toBeGreaterThan(0);
    expect(texts).toEqual(texts.map((_, i) => `room ${room} message ${i}`)); // in order, none lost, none twice
  }
  const exit = (await inspect(await containerOf("relay-2"))).State.ExitCode;
  expect(exit).toBe(0); // drained and exited by itself, not killed at the grace period
  // Whatever the clients saw was a retried "not now": no call failed.
  expect(waits.filter((w) => w.reason !== "network" && w.reason !== "unavailable")).toEqual([]);
  figures.record("compose", "stop relay-2 under traffic: seconds to stop", stopSeconds);
  figures.record("compose", "stop relay-2 under traffic: messages delivered", delivered.flat().length);
  figures.record("compose", "stop relay-2 under traffic: retried errors", waits.length);
  await Promise.all(pairs.map(({ a }) => client.close(a, { force: true })));
}, 180_000);

test("`docker compose restart redis` keeps rooms and pending messages; relays recover by themselves", async () => {
  const { a, b } = await openPair();
  const text = `survives a Redis restart ${process.pid}`;
  secrets.add(text);
  const sent = await client.send(a, text);
  const waits: WaitEvent[] = [];
  const started = Date.now();
  await compose(["restart", "redis"], 90_000);
  const restartSeconds = seconds(started);
  // The first call after the restart: retried on 503 until the relays are back on Redis.
  const got = await client.recv(b, { waitMs: 0, onWait: (e) => waits.push(e) });
  expect(got.messages).toEqual([{ id: sent.id, from: "a", text }]);
  expect(waits.every((w) => w.reason === "unavailable" || w.reason === "network")).toBe(true);
  for (const relay of RELAYS) {
    const ready = await inRelay(
      relay,
      "fetch('http://127.0.0.1:8080/readyz').then(r=>process.stdout.write(String(r.status)))",
    );
    expect({ relay, ready }).toEqual({ relay, ready: "200" });
  }
  figures.record("compose", "restart redis: seconds for the restart", restartSeconds);
  figures.record("compose", "restart redis: retried calls before the first success", waits.length);
  await client.ack(b, [sent.id]);
  await client.close(a);
}, 120_000);

test("the containers' logs hold no seat token and no message text", async () => {
  const logs = await compose(["logs", "--no-color"]);
  expect(logs.length).toBeGreaterThan(0);
  expect(logs).toContain('"msg":"listening"');
  for (const secret of secrets) expect(logs.includes(secret)).toBe(false);
}, 60_000);

test("`docker compose down` drains (waiting recvs answered) within the grace period; `up` again keeps pending messages", async () => {
  const { a, b } = await openPair();
  const text = `survives down and up ${process.pid}`;
  secrets.add(text);
  const sent = await client.send(a, text);
  const { b: idle } = await openPair();
  // A recv held open through nginx while the stack stops: answered, not cut off.
  const held = fetch(`${baseUrl}/v1/recv?wait=25000&code=${encodeURIComponent(idle.code)}`, {
    headers: { authorization: `Bearer ${idle.token}`, "user-agent": USER_AGENT },
  }).then(async (r) => ({ status: r.status, body: await r.json() }));
  for (let i = 0; (await Promise.all(RELAYS.map(waitingRecvs))).reduce((x, y) => x + y, 0) < 1; i++) {
    if (i > 30) throw new Error("the recv never started waiting");
  }
  const started = Date.now();
  await compose(["stop"], 120_000); // each service's own stop_grace_period, as `down` uses

  const stopSeconds = seconds(started);
  expect(await held).toEqual({ status: 200, body: { messages: [] } });
  // Exit 0 everywhere: each stopped by itself within its grace period (SIGKILL would be 137).
  for (const service of ["nginx", ...RELAYS, "redis"]) {
    const state = (await inspect(await containerOf(service))).State;
    expect({ service, exit: state.ExitCode, oom: state.OOMKilled }).toEqual({ service, exit: 0, oom: false });
  }
  const logs = await compose(["logs", "--no-color"]);
  for (const secret of secrets) expect(logs.includes(secret)).toBe(false);
  await compose(["down"], 120_000); // containers and network go; the Redis volume stays
  const upSeconds = await up(false);
  const got = await client.recv(b, { waitMs: 0 });
  expect(got.messages).toEqual([{ id: sent.id, from: "a", text }]);
  figures.record("compose", "stop (drain) of the whole stack (s)", stopSeconds);
  figures.record("compose", "up --wait to healthy, image built (s)", upSeconds);
  await client.ack(b, [sent.id]);
  await client.close(a);
}, 300_000);

/** The Deployment's memory limit in MiB and the ConfigMap's NODE_OPTIONS (infra/k8s/base). */
function podLimits(): { memoryMiB: number; nodeOptions: string } {
  const deployment = readFileSync(resolve(ROOT, "infra/k8s/base/deployment.yaml"), "utf8");
  const memory = /limits:\s*\n(?:\s+cpu:.*\n)?\s+memory:\s*(\d+)Mi/.exec(deployment)?.[1];
  const configMap = readFileSync(resolve(ROOT, "infra/k8s/base/configmap.yaml"), "utf8");
  const nodeOptions = /NODE_OPTIONS:\s*"([^"]*)"/.exec(configMap)?.[1];
  if (!memory || nodeOptions === undefined) throw new Error("the Deployment's memory limit or NODE_OPTIONS not found");
  return { memoryMiB: Number(memory), nodeOptions };
}

/** A raw stream request; resolves with its status line's code and headers, the socket left open. */
function openStream(
  host: string,
  port: number,
  code: string,
  token: string,
): Promise<{ status: number; headers: string; socket: Socket }> {
  return new Promise((done, fail) => {
    const socket = connect(port, host);
    let head = "";
    socket.setEncoding("utf8");
    socket.once("error", fail);
    socket.once("connect", () =>
      socket.write(
        `GET /v1/stream?code=${encodeURIComponent(code)}&format=ndjson HTTP/1.1\r\nHost: ${host}:${port}\r\nUser-Agent: ${USER_AGENT}\r\nAuthorization: Bearer ${token}\r\n\r\n`,
      ),
    );
    const onData = (chunk: string) => {
      head += chunk;
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.off("error", fail);
      socket.on("error", () => undefined);
      done({ status: Number(head.slice(9, 12)), headers: head.slice(0, end), socket });
    };
    socket.on("data", onData);
  });
}

/** Runs `task` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += width)
    results.push(...(await Promise.all(items.slice(i, i + width).map(task))));
  return results;
}

test("a relay container at the Deployment's memory limit and NODE_OPTIONS, offered more streams than it holds: the excess gets 503 with Retry-After, /readyz stays 200, its streams keep working, and it is never OOM-killed", async () => {
  const { memoryMiB, nodeOptions } = podLimits();
  const name = `duet-cap-${process.pid}`;
  const sockets: Socket[] = [];
  await run("docker", ["rm", "-f", name], { env: ENV }).catch(() => undefined);
  await run(
    "docker",
    [
      ...["run", "-d", "--name", name, "--memory", `${memoryMiB}m`, "--memory-swap", `${memoryMiB}m`],
      ...["-e", `NODE_OPTIONS=${nodeOptions}`, "-e", "RATE_LIMIT_REQUESTS=0", "-e", "RATE_LIMIT_ROOMS=0"],
      // Every stream comes from this one address: no share or connection bound per address,
      // the node's cap is what is tested.
      ...["-e", "ROOMS_PER_IP=0", "-e", "MAX_WAITERS_PER_CLIENT=off", "-e", "MAX_CONNECTIONS_PER_IP=0"],
      ...["-e", "LOG_LEVEL=warn", IMAGE],
    ],
    { env: ENV },
  );
  try {
    // The container's own address on Docker's bridge: thousands of connections through the
    // published port would each cost the userland proxy two descriptors of its own.
    const info = await inspect(name);
    const address = Object.values(info.NetworkSettings.Networks as Record<string, { IPAddress: string }>)[0]!.IPAddress;
    const port = 8080;
    const base = `http://${address}:${port}`;
    const get = (path: string) => fetch(`${base}${path}`, { headers: { "user-agent": USER_AGENT } });
    // A guard, not a measure: the container starting.
    for (const deadline = Date.now() + 60_000; ; ) {
      if ((await get("/readyz").catch(() => undefined))?.status === 200) break;
      if (Date.now() > deadline) throw new Error(`${name} not ready after 60 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const metric = async (metricName: string) => {
      const { stdout } = await run(
        "docker",
        [
          "exec",
          name,
          "node",
          "-e",
          "fetch('http://127.0.0.1:9464/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
        ],
        { env: ENV, maxBuffer: 16 << 20 },
      );
      return Number(
        stdout
          .split("\n")
          .find((l) => l.startsWith(`${metricName} `))
          ?.split(" ")[1],
      );
    };
    // The cap the node found in its own cgroup (MAX_WAITERS=auto).
    const cap = await metric("duet_waiters_max");
    expect(cap).toBeGreaterThan(1000);
    const offered = cap + 1000;
    const post = async (path: string, body: unknown) =>
      (await fetch(`${base}${path}`, {
        method: "POST",
        headers: { "user-agent": USER_AGENT, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then((r) => r.json())) as { code: string; token: string };
    const rooms = await inBatches(Array.from({ length: offered / 2 }), 32, async () => {
      const opened = await post("/v1/open", {});
      const joined = await post("/v1/join", { code: opened.code });
      return { code: opened.code, a: opened.token, b: joined.token };
    });
    const seats = rooms.flatMap((room) => [
      { room, seat: "a" as const, token: room.a },
      { room, seat: "b" as const, token: room.b },
    ]);
    const answers = await inBatches(seats, 200, async (seat) => {
      const answer = await openStream(address, port, seat.room.code, seat.token);
      sockets.push(answer.socket);
      if (answer.status !== 200) answer.socket.destroy();
      return { ...seat, ...answer };
    });
    const accepted = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect({ accepted: accepted.length, refused: refused.length }).toEqual({ accepted: cap, refused: offered - cap });
    for (const answer of refused) {
      expect(answer.status).toBe(503);
      expect(answer.headers).toMatch(/^retry-after: *[1-9]/im);
    }
    // Still ready: it serves every call but a new wait (readiness never depends on the waiters
    // it holds, which any client can fill; docs/operators.md).
    expect((await get("/readyz")).status).toBe(200);
    expect(await metric("duet_waiters_refused_total")).toBe(offered - cap);

    // Its streams keep working: a message to a held stream arrives on it.
    const holders = accepted.filter((a) => a.seat === "b").slice(0, 3);
    expect(holders).toHaveLength(3);
    for (const holder of holders) {
      const text = `through a full node ${holder.room.code}`;
      const arrived = new Promise<void>((done) => {
        let seen = "";
        holder.socket.on("data", (chunk: string) => {
          seen += chunk;
          if (seen.includes(text)) done();
        });
      });
      const sent = await fetch(`${base}/v1/send`, {
        method: "POST",
        headers: {
          "user-agent": USER_AGENT,
          "content-type": "application/json",
          authorization: `Bearer ${holder.room.a}`,
        },
        body: JSON.stringify({ code: holder.room.code, text }),
      });
      expect(sent.status).toBe(200);
      await arrived;
    }
    const usage = (
      await run("docker", ["stats", "--no-stream", "--format", "{{.MemUsage}}", name], { env: ENV })
    ).stdout.trim();
    figures.record("pod limits", `streams held at ${memoryMiB} MiB (MAX_WAITERS=auto)`, cap);
    figures.record("pod limits", "memory in use while full", usage);
    const state = (await inspect(name)).State;
    expect({ running: state.Running, oom: state.OOMKilled, restarts: (await inspect(name)).RestartCount }).toEqual({
      running: true,
      oom: false,
      restarts: 0,
    });
  } finally {
    for (const socket of sockets) socket.destroy();
    await run("docker", ["rm", "-f", name], { env: ENV }).catch(() => undefined);
  }
}, 600_000);
