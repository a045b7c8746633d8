// One duet node as Kubernetes runs it: a container from the image, with the Deployment's
// resource limits and the ConfigMap's NODE_OPTIONS read from infra/k8s/base (so a change to
// the manifests changes the run), on the host's network so the bench's clients and Redis
// reach it as they reach a process. Its figures come from its own /metrics listener (the
// prom-client process defaults an operator scrapes), since there is no IPC into a
// container: no forced GC before a memory reading (the run reads memory after a settle
// instead), and the event-loop window is the time since the previous scrape (prom-client
// resets its histogram on every collect).
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { type NodeMetrics, runQueueMs } from "./node-metrics.js";
import type { ServerProcess } from "./processes.js";
import { sleep } from "./stats.js";

const K8S_BASE = join(__dirname, "..", "..", "..", "infra", "k8s", "base");

/** What the manifests give a relay pod: memory and CPU limits, NODE_OPTIONS. */
export function manifestLimits(): { memory: string; cpus: string; nodeOptions: string } {
  const deployment = readFileSync(join(K8S_BASE, "deployment.yaml"), "utf8");
  const configMap = readFileSync(join(K8S_BASE, "configmap.yaml"), "utf8");
  const limits = deployment.slice(deployment.indexOf("limits:"));
  const memory = /memory:\s*(\d+)Mi/.exec(limits)?.[1];
  const cpus = /cpu:\s*"?([\d.]+)"?/.exec(limits)?.[1];
  const nodeOptions = /NODE_OPTIONS:\s*"([^"]*)"/.exec(configMap)?.[1];
  if (!memory || !cpus || nodeOptions === undefined)
    throw new Error("infra/k8s/base: the relay's limits or NODE_OPTIONS not found");
  return { memory: `${memory}m`, cpus, nodeOptions };
}

/** Containers this run started, removed on every way out (scale-children.ts's killAll). */
export const containers = new Set<string>();
export function removeContainers(): void {
  for (const name of containers) {
    try {
      execFileSync("docker", ["rm", "-f", name], { stdio: "ignore" });
    } catch {
      // already gone
    }
  }
  containers.clear();
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** prom-client text: `name{labels} value` lines, summed over labels. */
function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (match) values.set(match[1]!, (values.get(match[1]!) ?? 0) + Number(match[2]));
  }
  return values;
}

/**
 * Scrapes of all container nodes, one at a time. A render blocks its node's loop for 10-20 ms
 * (about 700 series), and prom-client starts a new event-loop window as it renders, so that
 * render falls inside the window it opens: thirteen rendering at once on two cores measured
 * 100-400 ms pauses on idle nodes that had no other work. Prometheus spreads its scrapes
 * over the interval; so does the bench.
 */
let scrapes: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(scrape: () => Promise<T>): Promise<T> {
  const next = scrapes.then(scrape, scrape);
  scrapes = next.catch(() => undefined);
  return next;
}

/** The event-loop histogram's resolution (prom-client's default): it records whole intervals. */
const ELD_RESOLUTION_MS = 10;

export async function startContainerNode(
  name: string,
  image: string,
  env: Record<string, string>,
  /** A directory for CPU profiles: the node writes one into a directory of its own there when it stops. */
  cpuProfileDir?: string,
): Promise<ServerProcess> {
  const limits = manifestLimits();
  const [port, metricsPort] = [await freePort(), await freePort()];
  const container = `duet-bench-${process.pid}-${name.replace(/\W+/g, "-")}`;
  // Every container's node is PID 1, and its profile is named by PID and time: a directory each.
  const profileDir = cpuProfileDir && join(cpuProfileDir, name.replace(/\W+/g, "-"));
  if (profileDir) {
    mkdirSync(profileDir, { recursive: true });
    chmodSync(profileDir, 0o777); // the image's user (uid 1000) writes it
  }
  const settings: Record<string, string> = {
    ...env,
    HOST: "127.0.0.1",
    PORT: String(port),
    METRICS_HOST: "127.0.0.1",
    METRICS_PORT: String(metricsPort),
    NODE_OPTIONS: `${limits.nodeOptions}${profileDir ? ` --cpu-prof --cpu-prof-dir=${profileDir}` : ""}`,
  };
  containers.add(container);
  execFileSync(
    "docker",
    [
      "run",
      "-d",
      "--rm",
      "--name",
      container,
      "--network",
      "host",
      "--memory",
      limits.memory,
      // No swap beyond the limit, as on a Kubernetes node: past it the kernel OOM-kills.
      "--memory-swap",
      limits.memory,
      "--cpus",
      limits.cpus,
      "--read-only",
      // Kubernetes ignores the image's HEALTHCHECK (its probes are HTTP calls from the kubelet).
      "--no-healthcheck",
      ...(profileDir ? ["-v", `${profileDir}:${profileDir}`] : []),
      ...Object.entries(settings).flatMap(([key, value]) => ["-e", `${key}=${value}`]),
      image,
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  const pid = Number(execFileSync("docker", ["inspect", "-f", "{{.State.Pid}}", container], { encoding: "utf8" }));
  const url = `http://127.0.0.1:${port}`;
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  for (const deadline = Date.now() + 30_000; ; await sleep(200)) {
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) throw new Error(`${name} (container ${container}) not ready after 30 s`);
  }
  return {
    name,
    url,
    metricsUrl,
    pid,
    metrics: async () => {
      const text = await oneAtATime(async () => {
        const response = await fetch(`${metricsUrl}/metrics`, { signal: AbortSignal.timeout(20_000) });
        return response.text();
      });
      const m = parseMetrics(text);
      const get = (metric: string) => m.get(`duet_${metric}`) ?? Number.NaN;
      const eld = (metric: string) => Math.max(0, get(metric) * 1000 - ELD_RESOLUTION_MS);
      const waiting = get("recv_waiting") + get("streams_open");
      return {
        rss: get("process_resident_memory_bytes"),
        heapUsed: get("nodejs_heap_size_used_bytes"),
        heapTotal: get("nodejs_heap_size_total_bytes"),
        external: get("nodejs_external_memory_bytes"),
        eldP50Ms: eld("nodejs_eventloop_lag_p50_seconds"),
        eldP99Ms: eld("nodejs_eventloop_lag_p99_seconds"),
        eldMaxMs: eld("nodejs_eventloop_lag_max_seconds"),
        cpuUserUs: get("process_cpu_user_seconds_total") * 1e6,
        cpuSystemUs: get("process_cpu_system_seconds_total") * 1e6,
        runQueueMs: runQueueMs(pid),
        waiting,
        connections: waiting,
      } satisfies NodeMetrics;
    },
    heapSnapshot: () => Promise.reject(new Error("no heap snapshots of a container node")),
    stop: async () => {
      try {
        execFileSync("docker", ["stop", "-t", "15", container], { stdio: "ignore" });
      } catch {
        // already gone
      }
      containers.delete(container);
    },
  };
}
