// `pnpm --filter @duet/bench test` (part of the root `pnpm test` and CI): every benchmark's
// --smoke, so that the harness cannot rot. Each smoke mostly waits (its phases last seconds
// whatever the machine does), so they run in two chains at once, of about the same length on
// a quiet machine: about 70 s instead of 130 s one after another. Each smoke prints what it
// prints alone (one line when it passes, its log when it fails); then one line each with its
// time. Fails when any smoke fails; a failed smoke does not stop the others.
import { spawn } from "node:child_process";
import { join } from "node:path";

/** Seconds each took alone on a quiet 2-core machine: strangers 41, cli 29, scale 27, the rest 3 to 12. */
const CHAINS = [
  ["strangers", "scale", "mcp-latency"],
  ["cli", "rate-burst", "limits", "hostile", "scrape-flood"],
];

interface Ran {
  name: string;
  code: number | null;
  seconds: number;
}

function smoke(name: string): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(__dirname, `${name}.js`), "--smoke"], { stdio: "inherit" });
    child.on("close", (code) => resolve({ name, code, seconds: (Date.now() - started) / 1000 }));
  });
}

async function chain(names: string[]): Promise<Ran[]> {
  const ran: Ran[] = [];
  for (const name of names) ran.push(await smoke(name));
  return ran;
}

async function main(): Promise<number> {
  const ran = (await Promise.all(CHAINS.map(chain))).flat();
  for (const r of ran)
    process.stdout.write(
      `bench smoke ${r.name}: ${r.code === 0 ? "passed" : `FAILED (${r.code})`} in ${Math.round(r.seconds)} s\n`,
    );
  return ran.every((r) => r.code === 0) ? 0 : 1;
}

main().then((code) => process.exit(code));
