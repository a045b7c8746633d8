// Turns a run's results into the markdown table and the SVG chart (our own few lines of
// SVG: two panels, throughput and p99 against concurrency, one line per server).
import type { CycleResult } from "./scenarios/message-cycle.js";
import type { CapacityResult } from "./scenarios/capacity.js";
import type { LifeCost } from "./scenarios/redis-cost.js";
import type { WakeResult } from "./scenarios/wake.js";

export type Target = "duet" | "express" | "http";
export const TARGET_NAMES: Record<Target, string> = { duet: "duet", express: "bare Express", http: "bare node:http" };

export interface TargetCheck {
  target: string;
  goal: string;
  measured: string;
  met: boolean;
}

export interface RunResults {
  meta: {
    date: string;
    machine: string;
    node: string;
    redis: string;
    pinned: boolean;
    smoke: boolean;
    seconds?: number;
    loadAverage?: { before: number; after: number };
  };
  cycle: {
    sweep: Record<Target, CycleResult[]>;
    peak: Record<Target, CycleResult>;
    rounds: {
      rooms: number;
      count: number;
      perTarget: Record<
        Target,
        {
          messagesPerSecond: number;
          p50Ms: number;
          p99Ms: number;
          serverCpuUsPerMessage: number;
          serverCpuShare: number;
          generatorCpuShare: number;
          ratioToExpress: number;
          ratioToHttp: number;
          all: number[];
        }
      >;
    };
    ratios: {
      toExpress: number;
      toHttp: number;
      peakToExpress: number;
      peakToHttp: number;
      cpuToExpress: number;
      cpuToHttp: number;
    };
  };
  wake: { duet: WakeResult; bareHttp: WakeResult; bareDirect: WakeResult; p99Ratio: number };
  capacity: CapacityResult[];
  redisCost: { quiet: LifeCost[]; underLoad: LifeCost };
  targets: TargetCheck[];
}

const f = (value: number | null | undefined, digits = 2) =>
  value === null || value === undefined || !Number.isFinite(value) ? "n/a" : value.toFixed(digits);
const n0 = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "n/a");

export function markdown(r: RunResults): string {
  const out: string[] = [];
  const { rounds, ratios, peak } = r.cycle;
  out.push(
    `Machine: ${r.meta.machine}; Node ${r.meta.node}; Redis ${r.meta.redis}; servers pinned to CPU0, load generator and Redis to CPU1: ${r.meta.pinned ? "yes" : "no"}. Run ${r.meta.date}${r.meta.smoke ? " (SMOKE: tiny, not figures)" : ""}; 1-minute loadavg ${r.meta.loadAverage?.before ?? "?"} before, ${r.meta.loadAverage?.after ?? "?"} after (2 cores; other work on the machine raises it).`,
  );
  out.push("");
  out.push(
    `### Message cycle (send -> recv -> ack, both seats), ${rounds.rooms} rooms, median of ${rounds.count} interleaved rounds`,
  );
  out.push("");
  out.push(
    "| Server | messages/s | send->recv p50 ms | p99 ms | ratio to bare Express | ratio to bare node:http | server CPU us per message (CPU used) | load generator CPU | peak messages/s (rooms) in the sweep |",
  );
  out.push("|---|---|---|---|---|---|---|---|---|");
  for (const t of ["duet", "express", "http"] as Target[]) {
    const m = rounds.perTarget[t];
    out.push(
      `| ${TARGET_NAMES[t]} | ${n0(m.messagesPerSecond)} | ${f(m.p50Ms)} | ${f(m.p99Ms)} | ${f(m.ratioToExpress)} | ${f(m.ratioToHttp)} | ${n0(m.serverCpuUsPerMessage)} (${f(m.serverCpuShare * 100, 0)} %) | ${f(m.generatorCpuShare * 100, 0)} % | ${n0(peak[t].messagesPerSecond)} (${peak[t].rooms}) |`,
    );
  }
  out.push("");
  out.push(
    `Ratios are medians of per-round ratios. Peak to peak: duet / bare Express = ${f(ratios.peakToExpress)}, duet / bare node:http = ${f(ratios.peakToHttp)}. ` +
      `By server CPU per message (the throughput one saturated core would reach): duet / bare Express = ${f(ratios.cpuToExpress)}, duet / bare node:http = ${f(ratios.cpuToHttp)}. ` +
      "A message life is 3 HTTP calls (send, recv, ack), 4 when the recv comes back empty-handed first.",
  );
  out.push("");
  out.push("### Wake latency across nodes (recv waiting on node B, send on node A)");
  out.push("");
  out.push("| Path | wakes | p50 ms | p99 ms | max ms |");
  out.push("|---|---|---|---|---|");
  const wakeRow = (name: string, w: WakeResult) =>
    out.push(`| ${name} | ${w.wakes} | ${f(w.p50Ms)} | ${f(w.p99Ms)} | ${f(w.maxMs)} |`);
  wakeRow("duet: POST /v1/send on A -> GET /v1/recv answered on B", r.wake.duet);
  wakeRow("bare node:http: POST /pub on A (SPUBLISH) -> held GET answered on B", r.wake.bareHttp);
  wakeRow("bare node:http: SPUBLISH from the bench -> held GET answered", r.wake.bareDirect);
  out.push("");
  out.push(`duet p99 / bare (HTTP-triggered) p99 = ${f(r.wake.p99Ratio)}.`);
  out.push("");
  out.push("### Capacity: waiting recvs on one node");
  out.push("");
  out.push(
    "| Waiting recvs | RSS MB at 0 -> N (after GC) | RSS per waiting recv KB | heap per waiting recv KB | event-loop delay p99 / max ms | node CPU while waiting | re-check scripts/s | Redis connections at 0 / N |",
  );
  out.push("|---|---|---|---|---|---|---|---|");
  for (const c of r.capacity) {
    out.push(
      `| ${n0(c.waiting)} | ${f(c.rssBeforeMb, 0)} -> ${f(c.rssAtNMb, 0)} | ${f(c.rssPerWaitingKb, 1)} | ${f(c.heapPerWaitingKb, 1)} | ${f(c.eldP99Ms)} / ${f(c.eldMaxMs)} | ${f(c.nodeCpuWhileWaiting * 100, 0)} % | ${n0(c.redisScriptsPerSecond)} | ${c.redisConnectionsAt0} / ${c.redisConnectionsAtN} |`,
    );
  }
  out.push("");
  out.push("### Redis cost per message life (send + recv + ack)");
  out.push("");
  out.push(
    "| Shape | lives | round trips (by command) | commands inside scripts | wake publishes | Redis time in commands us | Redis CPU us |",
  );
  out.push("|---|---|---|---|---|---|---|");
  for (const c of [...r.redisCost.quiet, r.redisCost.underLoad]) {
    const trips = Object.entries(c.roundTrips)
      .map(([name, count]) => `${name} ${f(count)}`)
      .join(", ");
    out.push(
      `| ${c.shape} | ${n0(c.lives)} | ${f(c.roundTripsTotal)} (${trips}) | ${f(c.inScriptCommands, 1)} | ${f(c.wakePublishes)} | ${f(c.redisCommandUs, 0)} | ${f(c.redisCpuUs, 0)} |`,
    );
  }
  out.push("");
  out.push("### Targets");
  out.push("");
  out.push("| Target | Goal | Measured | Met |");
  out.push("|---|---|---|---|");
  for (const t of r.targets) out.push(`| ${t.target} | ${t.goal} | ${t.measured} | ${t.met ? "yes" : "**no**"} |`);
  out.push("");
  return out.join("\n");
}

const COLORS: Record<Target, string> = { duet: "#d62728", express: "#1f77b4", http: "#2ca02c" };

/** Two panels: messages/s and p99 (log scale) against rooms (log2 scale). */
export function chart(sweep: Record<Target, CycleResult[]>, caption: string): string {
  const W = 900;
  const H = 380;
  const panelW = 380;
  const panelH = 260;
  const top = 50;
  const lefts = [70, 520];
  const all = Object.values(sweep).flat();
  if (all.length === 0) return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}"/>`;
  const maxRooms = Math.max(...all.map((c) => c.rooms));
  const xOf = (left: number, rooms: number) => left + (Math.log2(rooms) / Math.max(1, Math.log2(maxRooms))) * panelW;
  const maxMps = Math.max(...all.map((c) => c.messagesPerSecond)) * 1.1;
  const p99s = all.map((c) => c.p99Ms).filter((v) => Number.isFinite(v) && v > 0);
  const lo = Math.floor(Math.log10(Math.min(...p99s, 1)));
  const hi = Math.ceil(Math.log10(Math.max(...p99s, 10)));
  const yMps = (v: number) => top + panelH - (v / maxMps) * panelH;
  const yP99 = (v: number) => top + panelH - ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * panelH;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
  );
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${caption}</text>`);
  const panel = (left: number, title: string, ticks: [number, string][]) => {
    parts.push(`<text x="${left + panelW / 2}" y="${top - 10}" text-anchor="middle">${title}</text>`);
    parts.push(`<rect x="${left}" y="${top}" width="${panelW}" height="${panelH}" fill="none" stroke="#999"/>`);
    for (const [y, label] of ticks) {
      parts.push(`<line x1="${left}" x2="${left + panelW}" y1="${y}" y2="${y}" stroke="#eee"/>`);
      parts.push(`<text x="${left - 6}" y="${y + 4}" text-anchor="end">${label}</text>`);
    }
    for (let rooms = 1; rooms <= maxRooms; rooms *= 2) {
      const x = xOf(left, rooms);
      parts.push(`<text x="${x}" y="${top + panelH + 16}" text-anchor="middle">${rooms}</text>`);
    }
    parts.push(
      `<text x="${left + panelW / 2}" y="${top + panelH + 34}" text-anchor="middle">rooms (2 seats each, one request in flight per seat)</text>`,
    );
  };
  const mpsTicks: [number, string][] = [];
  for (let i = 0; i <= 5; i++) mpsTicks.push([yMps((maxMps / 5) * i), n0((maxMps / 5) * i)]);
  const p99Ticks: [number, string][] = [];
  for (let e = lo; e <= hi; e++) p99Ticks.push([yP99(10 ** e), String(10 ** e)]);
  panel(lefts[0]!, "messages per second", mpsTicks);
  panel(lefts[1]!, "send -> recv p99, ms (log)", p99Ticks);
  for (const t of Object.keys(sweep) as Target[]) {
    const points = sweep[t];
    const line = (left: number, y: (c: CycleResult) => number) =>
      parts.push(
        `<polyline fill="none" stroke="${COLORS[t]}" stroke-width="2" points="${points.map((c) => `${xOf(left, c.rooms).toFixed(1)},${y(c).toFixed(1)}`).join(" ")}"/>`,
      );
    line(lefts[0]!, (c) => yMps(c.messagesPerSecond));
    line(lefts[1]!, (c) => yP99(c.p99Ms));
  }
  (Object.keys(sweep) as Target[]).forEach((t, i) => {
    const x = 120 + i * 220;
    parts.push(`<line x1="${x}" x2="${x + 24}" y1="${H - 14}" y2="${H - 14}" stroke="${COLORS[t]}" stroke-width="3"/>`);
    parts.push(`<text x="${x + 30}" y="${H - 10}">${TARGET_NAMES[t]}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n");
}
