// The scale run's command line (src/scale.ts): every option with its default, the full run's
// or the smoke's, and the run's name (its results' file names).
function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1]! : fallback;
}
const flag = (name: string) => process.argv.includes(`--${name}`);

export const smoke = flag("smoke");
export const mode = option("mode", "stream") as "stream" | "long-poll";
export const cluster = flag("cluster");
export const seats = Number(option("seats", smoke ? "200" : "100000"));
/** Seats one process (relay or client) may hold: the fd hard limit is 20,000. */
const PER_PROCESS = 17_000;
export const nodeCount = Number(option("nodes", String(Math.max(2, Math.ceil(seats / PER_PROCESS)))));
export const clientCount = Number(option("clients", String(Math.max(2, Math.ceil(seats / PER_PROCESS)))));
export const emptySeconds = Number(option("empty", smoke ? "1" : "15"));
export const settleSeconds = Number(option("settle", smoke ? "1" : "20"));
export const windowSeconds = Number(option("window", smoke ? "2" : "60"));
export const loadSeconds = Number(option("load-seconds", smoke ? "3" : "60"));
export const afterSeconds = Number(option("after", smoke ? "1" : "30"));
/** Share of the rooms that send, each once a second. */
export const loadShare = Number(option("load-share", smoke ? "0.1" : "0.01"));
export const connectConcurrency = Number(option("concurrency", "24"));
/** With --heap-snapshot DIR: node 0 writes a heap snapshot before the seats connect and another once they are all waiting. */
export const heapSnapshotDir = process.argv.includes("--heap-snapshot") ? option("heap-snapshot", "") : undefined;
export const extraEnv: Record<string, string> = {};
process.argv.forEach((arg, i) => {
  if (arg === "--env") {
    const [key, ...value] = process.argv[i + 1]!.split("=");
    extraEnv[key!] = value.join("=");
  }
});
/** --bare http|express: the nodes are bare servers that only hold the seats' requests (src/hold-node.ts): the floor under duet's memory per seat. No Redis, no rooms, no message load. */
export const bare = process.argv.includes("--bare") ? (option("bare", "http") as "http" | "express") : undefined;
/** --container IMAGE: the measured nodes are containers from the image with the Kubernetes manifests' limits and NODE_OPTIONS (src/container-node.ts). */
export const containerImage = process.argv.includes("--container")
  ? option("container", "duet-relay:local")
  : undefined;
/** --cpu-prof DIR: each measured node writes a V8 CPU profile there when it stops (read with dist/cpu-pauses.js). */
export const cpuProfileDir = process.argv.includes("--cpu-prof") ? option("cpu-prof", "") : undefined;
/** --tag T: results/scale-…-<N>-T (a comparison's two runs, say). */
const tag = process.argv.includes("--tag") ? `-${option("tag", "")}` : "";
export const name = `scale-${mode}${cluster ? "-cluster" : ""}${containerImage ? "-container" : ""}${bare ? `-bare-${bare}` : ""}-${seats}${tag}`;

export const quiet = smoke && process.env.DUET_FIGURES !== "1";
