#!/usr/bin/env node
// Prints the partition soak's figures (results/network-partitions.json, written by
// `DUET_SOAK=1 pnpm exec jest test/reliability/network-partitions.test.ts`) as a Markdown table.
// Usage: node test/reliability/partition-table.mjs [figures.json]
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const file = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "results", "network-partitions.json");
const { rooms, arms } = JSON.parse(readFileSync(file, "utf8"));
const n = (value) => (value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en-US"));
// Absent: does not apply; null: never (JSON writes Infinity as null).
const s = (ms) => (ms === undefined ? "–" : ms === null ? "never" : (ms / 1000).toFixed(1));
const topologyOf = (name) => (name.startsWith("sentinel") ? "Sentinel" : "Cluster");
const ackOf = (name) => /ack(\w+)$/.exec(name)[1];

const rows = Object.entries(arms).flatMap(([name, scenarios]) =>
  scenarios.map(
    (f) =>
      `| ${topologyOf(name)} | ${ackOf(name)} | ${f.scenario}${f.beyondPromise ? " (beyond the promise)" : ""} | ${s(f.cutMs)} | ${n(f.acknowledgedSends)} | **${n(f.lost)}** | ${n(f.acksUndone)} | ${n(f.duplicates)} | ${n(f.hung)} | ${n(f.minorityAcknowledged)} | ${s(f.promotionToServedMs)} | ${s(f.healToServedMs)} |`,
  ),
);

console.log(
  [
    `${rooms} rooms exchanging keyed messages both ways through 2 relays, a probe through each relay.`,
    "",
    "| Topology | write-ack | scenario | cut, s | acknowledged sends | lost | acks undone | stored twice | hung | acknowledged by the old master's side after the promotion | promotion to served (majority relay), s | heal to served (cut relay), s |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n"),
);
