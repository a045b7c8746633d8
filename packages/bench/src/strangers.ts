// `pnpm --filter @duet/bench strangers [--only waiters,bigwake,flood,connections] [--smoke]`:
// can a stranger take a node, or every node, out of service? Four scenarios on relays of their
// own (src/strangers-waiters.ts, strangers-bigwake.ts, strangers-flood.ts,
// strangers-connections.ts), each writing results/strangers-<name>.md and printing each target
// met or not; it fails only when a scenario could not run. packages/bench/README.md, "Strangers".
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { option } from "./cli-args.js";
import { LOAD_CPU, pin } from "./processes.js";
import { bigwake } from "./strangers-bigwake.js";
import { connections } from "./strangers-connections.js";
import { floodScenario } from "./strangers-flood.js";
import { waiters } from "./strangers-waiters.js";

export interface Section {
  name: string;
  title: string;
  markdown: string;
  targets: { name: string; ok: boolean }[];
}

const SCENARIOS = ["waiters", "bigwake", "flood", "connections"] as const;

async function main(): Promise<void> {
  const smoke = process.argv.includes("--smoke");
  const only = option("only", SCENARIOS.join(",")).split(",");
  for (const name of only)
    if (!(SCENARIOS as readonly string[]).includes(name))
      throw new Error(`--only: unknown scenario ${name} (one of ${SCENARIOS.join(", ")})`);
  const num = (name: string, full: number, quick: number) => Number(option(name, String(smoke ? quick : full)));
  pin(process.pid, LOAD_CPU);
  const load = loadavg()[0]!.toFixed(1);
  const started = Date.now();
  const dir = join(__dirname, "..", "results", smoke ? "smoke" : "");
  mkdirSync(dir, { recursive: true });
  const sections: Section[] = [];
  for (const name of only) {
    const scenarioStarted = Date.now();
    let section: Section;
    if (name === "waiters")
      section = await waiters({
        smoke,
        waiters: num("waiters", 600, 60),
        cap: num("cap", 200, 20),
        requestsLimit: num("requests-limit", 5000, 5000),
        afterSeconds: num("after-seconds", 5, 1),
      });
    else if (name === "bigwake")
      section = await bigwake({
        smoke,
        recvs: num("recvs", 200, 10),
        textChars: num("text-chars", 2 * 2 ** 20, 2 ** 16),
      });
    else if (name === "flood")
      section = await floodScenario({
        smoke,
        calmSeconds: num("calm-seconds", 5, 1),
        floodSeconds: num("flood-seconds", 10, 2),
      });
    else
      section = await connections({
        smoke,
        nofile: num("nofile", 2048, 512),
        idle: num("idle", 2100, 560),
        selftests: num("selftests", 600, 60),
        holdSeconds: num("hold-seconds", 10, 2),
      });
    const seconds = Math.round((Date.now() - scenarioStarted) / 1000);
    const markdown = [
      `# Strangers: ${section.title}`,
      "",
      `\`pnpm --filter @duet/bench strangers --only ${name}${smoke ? " --smoke" : ""}\`, ${new Date().toISOString().slice(0, 16)}Z: ${cpus().length} cores, loadavg ${load} at the start, ${seconds} s.`,
      "",
      section.markdown,
      "",
      "Targets:",
      "",
      ...section.targets.map((t) => `- ${t.ok ? "yes" : "no"}: ${t.name}`),
      "",
    ].join("\n");
    writeFileSync(join(dir, `strangers-${name}.md`), markdown);
    if (smoke && section.targets.length === 0) throw new Error(`strangers smoke: ${name} measured nothing`);
    sections.push(section);
    if (!smoke) process.stdout.write(`${markdown}\n`);
  }
  const lines = sections.flatMap((s) => s.targets.map((t) => `${t.ok ? "yes" : "no "}  ${t.name}`));
  process.stdout.write(
    smoke
      ? `strangers smoke: ${only.join(", ")} ran in ${Math.round((Date.now() - started) / 1000)} s; ${lines.filter((l) => l.startsWith("yes")).length} of ${lines.length} targets met (figures: ${dir}/strangers-*.md)\n`
      : `\nTargets met:\n${lines.join("\n")}\n`,
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`strangers failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
