// `node dist/fault-search.js [--failovers N] [--seed S] [--kinds a,b] [--stress]`: the fault
// search's long form (packages/server/test/reliability/fault-search.test.ts, issue 37): drawn
// faults against Sentinel with write-ack `all` until N failovers (default 50) happened,
// `--stress` beside `stress-ng --cpu 2`. Appends one row to results/fault-search.md (the
// table docs/high-availability.md summarises) and keeps the run's report beside it.
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { option } from "./cli-args.js";

const FAILOVERS = option("failovers", "50");
const SEED = option("seed", String(Math.floor(Math.random() * 2 ** 31)));
const KINDS = option("kinds", "");
const STRESS = process.argv.includes("--stress");
const SERVER = resolve(__dirname, "../../server");
const RESULTS = resolve(__dirname, "../results");
const TABLE = join(RESULTS, "fault-search.md");
// Written once, by the first run on a fresh clone; later runs append a row.
const HEADER = `# Fault search runs

| Date (UTC) | Seed | Beside | Load average (start / end) | Failovers | Rounds | Faults drawn | Acknowledged sends | Lost | Acks undone | Stored twice | 503s |
|---|---|---|---|---|---|---|---|---|---|---|---|
`;

const load = () => loadavg()[0]!.toFixed(1);

async function main(): Promise<number> {
  const stress = STRESS ? spawn("stress-ng", ["--cpu", "2", "--quiet"], { stdio: "ignore" }) : undefined;
  const loadBefore = load();
  const report = join(RESULTS, `fault-search-${SEED}.json`);
  const env = {
    ...process.env,
    DUET_FAULT_SEARCH_FAILOVERS: FAILOVERS,
    DUET_FAULT_SEARCH_SEED: SEED,
    DUET_FAULT_SEARCH_REPORT: report,
    ...(KINDS ? { DUET_FAULT_SEARCH_KINDS: KINDS } : {}),
  };
  let code: number | null;
  try {
    code = spawnSync("pnpm", ["exec", "jest", "test/reliability/fault-search.test.ts"], {
      cwd: SERVER,
      env,
      stdio: "inherit",
    }).status;
  } finally {
    stress?.kill("SIGTERM");
  }
  if (!existsSync(report)) {
    process.stderr.write(`fault-search: no report at ${report} (jest exited ${code})\n`);
    return 1;
  }
  const r = JSON.parse(readFileSync(report, "utf8"));
  const kinds = Object.entries(r.kinds as Record<string, number>)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(", ");
  const row = `| ${new Date().toISOString().slice(0, 16).replace("T", " ")} | ${r.seed} | ${STRESS ? "stress-ng --cpu 2" : "no stress-ng"} | ${loadBefore} / ${load()} | ${r.failovers} | ${r.rounds} | ${kinds} | ${r.acknowledgedSends} | ${r.lost} | ${r.acksUndone} | ${r.duplicates} | ${r.status503} |\n`;
  mkdirSync(dirname(TABLE), { recursive: true });
  if (!existsSync(TABLE)) writeFileSync(TABLE, HEADER);
  appendFileSync(TABLE, row);
  process.stdout.write(row);
  return code ?? 1;
}

main().then((code) => process.exit(code));
