// `pnpm --filter @duet/bench profile`: a short CPU profile of one duet node under the
// message-cycle load (node --cpu-prof), summarised by where the self time goes. Writes
// profiles/duet-*.cpuprofile (open it in Chrome DevTools) and results/profile.json.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LOAD_CPU, duetEnv, pin, startRedis, startServer } from "./processes.js";
import { LIMITS_ON } from "./limits.js";
import { runCycle } from "./scenarios/message-cycle.js";

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

// First match wins; the order puts the specific (hashing inside node:crypto, duet's own
// validation module) before the general (node internals, the rest of duet).
const CATEGORIES: [string, (f: ProfileNode["callFrame"]) => boolean][] = [
  ["idle", (f) => f.functionName === "(idle)"],
  ["garbage collection", (f) => f.functionName === "(garbage collector)"],
  ["validation (zod, protocol schemas)", (f) => /\/zod\/|\/protocol\/dist\/|\/http\/validate\.js/.test(f.url)],
  [
    "auth / hashing (SHA-256 of token and text)",
    (f) =>
      /internal\/crypto|\/store\/credentials\.js|\/http\/auth\.js/.test(f.url) ||
      /^(createHash|digest|update|Hash)$/.test(f.functionName),
  ],
  [
    "Redis client (ioredis, RESP parser)",
    (f) => /ioredis|redis-parser|redis-errors|denque|cluster-key-slot|standard-as-callback/.test(f.url),
  ],
  [
    "logging (pino)",
    (f) =>
      /pino|sonic-boom|thread-stream|fast-redact|quick-format|safe-stable-stringify|\/request-log\.js|\/logger\.js/.test(
        f.url,
      ),
  ],
  [
    "body parsing (body-parser, raw-body)",
    (f) => /body-parser|raw-body|iconv-lite|content-type|type-is|media-typer|bytes\/|on-finished|unpipe/.test(f.url),
  ],
  ["JSON parse / stringify", (f) => f.url === "" && /^(parse|stringify|JSONParse|JSONStringify)$/.test(f.functionName)],
  ["helmet (security headers)", (f) => /\/helmet\//.test(f.url)],
  [
    "Express framework (router, req/res helpers)",
    (f) =>
      /\/express\/|\/router\/|path-to-regexp|finalhandler|\/send\/|parseurl|\/qs\/|accepts|negotiator|depd|vary|proxy-addr|forwarded|mime|encodeurl|escape-html|etag|fresh|range-parser|statuses|merge-descriptors|cookie|content-disposition|setprototypeof|http-errors|utils-merge|methods|debug\//.test(
        f.url,
      ),
  ],
  ["duet handlers and store (other)", (f) => /\/server\/dist\//.test(f.url)],
  ["Node HTTP, net, streams, timers", (f) => /^node:|^internal\//.test(f.url) || f.url === "node:internal"],
  ["native / unattributed ((program), builtins)", (f) => f.url === ""],
];

export function summariseProfile(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const own = (frame: ProfileNode["callFrame"]) => CATEGORIES.find(([, test]) => test(frame))?.[0] ?? "other";
  // Node internals and natives are charged to the nearest caller in a library or in duet
  // (a socket write under pino is logging; under res.json it is the framework's answer),
  // and stay "Node HTTP" only when nothing of ours is above them (the HTTP parser, timers).
  const GENERIC = new Set(["Node HTTP, net, streams, timers", "native / unattributed ((program), builtins)"]);
  const categoryOf = (id: number): string => {
    const leaf = own(byId.get(id)!.callFrame);
    if (!GENERIC.has(leaf)) return leaf;
    for (let up = parent.get(id); up !== undefined; up = parent.get(up)) {
      const category = own(byId.get(up)!.callFrame);
      if (!GENERIC.has(category) && category !== "other") return category;
    }
    return leaf;
  };
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++)
    self.set(profile.samples[i]!, (self.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const categories = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  let total = 0;
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    const category = categoryOf(id);
    categories.set(category, (categories.get(category) ?? 0) + us);
    total += us;
    if (category === "idle") continue;
    busy += us;
    const where = frame.url
      ? `${frame.url.replace(/^.*node_modules\/\.pnpm\/[^/]+\/node_modules\//, "").replace(/^.*\/packages\//, "")}:${frame.lineNumber + 1}`
      : "(native)";
    const key = `${frame.functionName || "(anonymous)"} ${where}`;
    functions.set(key, (functions.get(key) ?? 0) + us);
  }
  const share = (us: number) => Math.round((us / busy) * 1000) / 10;
  return {
    totalMs: total / 1000,
    busyMs: busy / 1000,
    categories: [...categories]
      .filter(([name]) => name !== "idle")
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => ({ name, ms: Math.round(us / 1000), percentOfBusy: share(us) })),
    topFunctions: [...functions]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([name, us]) => ({ name, ms: Math.round(us / 1000), percentOfBusy: share(us) })),
  };
}

async function main(): Promise<void> {
  // `--limits`: the rate limits on, as `bench limits` runs them (the defaults' code path).
  const limits = process.argv.includes("--limits");
  const args = process.argv.slice(2).filter((a) => a !== "--limits");
  const rooms = Number(args[0] ?? 32);
  const seconds = Number(args[1] ?? 10);
  pin(process.pid, LOAD_CPU);
  const dir = join(__dirname, "..", "profiles");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const redis = await startRedis();
  try {
    const node = await startServer("duet (profiled)", "duet-node.js", {
      env: duetEnv(redis.url, limits ? LIMITS_ON : {}),
      execArgv: ["--cpu-prof", "--cpu-prof-dir", dir, "--cpu-prof-name", "duet-node.cpuprofile"],
    });
    const result = await runCycle(node.url, rooms, { warmupMs: 1000, measureMs: seconds * 1000 });
    await node.stop(); // the profile is written as the process exits
    const file = readdirSync(dir).find((name) => name.endsWith(".cpuprofile"));
    if (!file) throw new Error("no .cpuprofile was written");
    const summary = summariseProfile(JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile);
    const report = {
      date: new Date().toISOString(),
      rooms,
      seconds,
      messagesPerSecond: Math.round(result.messagesPerSecond),
      requestsPerSecond: Math.round(result.requestsPerSecond),
      profile: file,
      ...summary,
    };
    mkdirSync(join(__dirname, "..", "results"), { recursive: true });
    writeFileSync(join(__dirname, "..", "results", "profile.json"), `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(
      `${rooms} rooms, ${report.messagesPerSecond} msg/s, ${report.requestsPerSecond} req/s; busy ${summary.busyMs.toFixed(0)} of ${summary.totalMs.toFixed(0)} ms\n\n`,
    );
    process.stdout.write("| Category | self ms | % of busy |\n|---|---|---|\n");
    for (const c of summary.categories) process.stdout.write(`| ${c.name} | ${c.ms} | ${c.percentOfBusy} |\n`);
    process.stdout.write("\n| Function | self ms | % of busy |\n|---|---|---|\n");
    for (const c of summary.topFunctions) process.stdout.write(`| ${c.name} | ${c.ms} | ${c.percentOfBusy} |\n`);
  } finally {
    await redis.stop();
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error) => {
      process.stderr.write(`profile failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}
