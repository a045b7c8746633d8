#!/usr/bin/env node
// Prints the failover soak's figures (results/redis-failover.json, written by
// `DUET_SOAK=1 pnpm exec jest test/reliability/redis-failover.test.ts`) as a Markdown table.
// Usage: node test/reliability/failover-table.mjs [figures.json]
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const file = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "results", "redis-failover.json");
const { failoversPerArm, rooms, relays, arms } = JSON.parse(readFileSync(file, "utf8"));
const n = (value) => (Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "none");
const topologyOf = (name) =>
  name.startsWith("sentinel") ? "Sentinel (master + 2 replicas)" : "Cluster (3 masters + 1 replica each)";
const ackOf = (name) => /ack(\w+)$/.exec(name)[1];

const rows = Object.entries(arms).map(([name, arm]) => {
  const kinds = Object.entries(arm.kinds)
    .map(([kind, count]) => `${count} ${kind}`)
    .join(", ");
  return `| ${topologyOf(name)} | ${ackOf(name)} | ${arm.failovers} (${kinds}) | ${n(arm.acknowledgedSends)} | **${n(arm.lost)}** | ${n(arm.duplicates)} | ${n(arm.acksUndone)} | ${n(arm.idsReused)} | ${n(arm.hungPastBound ?? arm.hungPastWaitPlus2s)} | ${n(arm.status5xxOther)} | ${n(arm.status503)} | ${n(arm.promoteMsMedian)} | ${n(arm.firstSuccessAfterPromotionMsMedian)} / ${n(arm.firstSuccessAfterPromotionMsMax)} |`;
});

console.log(
  [
    `${failoversPerArm} forced failovers per arm, ${rooms} rooms exchanging keyed messages both ways through ${relays} relays.`,
    "",
    "| Topology | write-ack replicas | failovers | acknowledged sends | lost | stored twice | acks undone | ids reused | hung past wait + 2 s | 5xx other than 503 | 503s | fault to promotion, median ms | promotion to first success, median / max ms |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n"),
);
