// `node dist/cpu-pauses.js FILE.cpuprofile [--top N]`: where a node's event loop was held,
// read from a V8 CPU profile (`--cpu-prof`; the scale run's `--cpu-prof DIR`). It lists the
// longest busy stretches: runs of samples with no "(idle)" one (the loop waiting in epoll)
// between them. A stretch may hold several loop turns back to back, so it bounds a pause
// from above. Each is listed with the frames that took most of its samples (the innermost
// JS frame or V8's own: "(garbage collector)", "(program)"), and how much of it had no
// sample at all: the sampler thread did not run, i.e. the process was off the CPU (another
// process had the core).
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const file = process.argv[2];
if (!file) {
  process.stderr.write("usage: node dist/cpu-pauses.js FILE.cpuprofile [--top N]\n");
  process.exit(2);
}
const topAt = process.argv.indexOf("--top");
const top = topAt > 0 ? Number(process.argv[topAt + 1]) : 10;
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** A frame's label: V8's own entries as they are, JS as name (file:line) with the path shortened. */
function label(id: number): string {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  if (!url) return functionName || "(anonymous)";
  const short = url.replace(/^.*\/node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?/, "").replace(/^.*\/packages\//, "");
  return `${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`;
}
/** The outermost frame below the root that is ours or a library's: what the pause was doing. */
function entry(id: number): string {
  let at = id;
  const chain: number[] = [];
  while (parent.has(at)) {
    chain.push(at);
    at = parent.get(at)!;
  }
  const outer = chain
    .reverse()
    .find((n) => byId.get(n)!.callFrame.url || byId.get(n)!.callFrame.functionName.startsWith("("));
  return outer === undefined ? "(root)" : label(outer);
}

interface Pause {
  startMs: number;
  ms: number;
  /** Time inside the pause with no sample: gaps of more than twice the sampling interval. */
  unsampledMs: number;
  frames: Map<string, number>;
  entries: Map<string, number>;
}
const sortedDeltas = [...profile.timeDeltas].sort((a, b) => a - b);
const intervalMs = (sortedDeltas[sortedDeltas.length >> 1] ?? 1000) / 1000;
const pauses: Pause[] = [];
let current: Pause | undefined;
let at = 0;
profile.samples.forEach((id, i) => {
  const delta = (profile.timeDeltas[i] ?? 0) / 1000;
  at += delta;
  const name = byId.get(id)!.callFrame.functionName;
  if (name === "(idle)") {
    current = undefined;
    return;
  }
  if (!current) {
    current = { startMs: at, ms: 0, unsampledMs: 0, frames: new Map(), entries: new Map() };
    pauses.push(current);
  }
  current.ms += delta;
  // A gap before a sample is time off the CPU, not the sampled frame's.
  const gap = delta > 2 * intervalMs ? delta - intervalMs : 0;
  current.unsampledMs += gap;
  const frame = label(id);
  current.frames.set(frame, (current.frames.get(frame) ?? 0) + delta - gap);
  const outer = entry(id);
  current.entries.set(outer, (current.entries.get(outer) ?? 0) + delta - gap);
});

const most = (m: Map<string, number>, n: number) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${v.toFixed(1)} ms ${k}`)
    .join("; ");
const busy = pauses.reduce((s, p) => s + p.ms, 0);
process.stdout.write(
  `${file}: ${(at / 1000).toFixed(1)} s profiled (a sample every ${intervalMs.toFixed(2)} ms), ${(busy / 1000).toFixed(1)} s busy in ${pauses.length} stretches; the ${top} longest:\n`,
);
for (const p of pauses.sort((a, b) => b.ms - a.ms).slice(0, top))
  process.stdout.write(
    `- ${p.ms.toFixed(1)} ms at ${(p.startMs / 1000).toFixed(1)} s, ${p.unsampledMs.toFixed(1)} ms of it unsampled (off the CPU)\n    innermost: ${most(p.frames, 4)}\n    entered from: ${most(p.entries, 3)}\n`,
  );
