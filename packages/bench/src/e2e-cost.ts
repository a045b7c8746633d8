// `pnpm --filter @duet/bench e2e-cost`: what end-to-end encryption costs per message in the
// SDK (docs/encryption.md). Seals and opens real messages with E2eSession, the code that
// `duet send` / `duet recv` and `client.send` / `client.recv` run, and reports CPU time per
// message (sender + receiver) and the envelope's size against the text's. The relay's own
// work does not change with encryption apart from the bigger text (format check: one regex).
// Writes results/e2e-cost.md and prints it. `--smoke` runs a few messages only.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { E2eSession, newRoomKey } from "@duet/client";
import { isE2eEnvelope } from "@duet/protocol";
import { median } from "./stats.js";

const smoke = process.argv.includes("--smoke");
const SIZES = [100, 1024, 16 * 1024, 256 * 1024, 1024 * 1024];
const ROUNDS = smoke ? 1 : 7;
/** Messages per round: enough for ~0.2 s of work at each size. */
const perRound = (bytes: number) =>
  smoke ? 3 : Math.max(20, Math.min(5000, Math.round((64 * 1024 * 1024) / 16 / Math.max(bytes, 1024))));

interface Row {
  bytes: number;
  envelopeBytes: number;
  sealUs: number;
  openUs: number;
  formatCheckUs: number;
  totalUs: number;
  mbPerSecond: number;
}

function cpuUs(run: () => void): number {
  const before = process.cpuUsage();
  run();
  const used = process.cpuUsage(before);
  return used.user + used.system;
}

function measure(bytes: number): Row {
  // A text of `bytes` UTF-8 bytes, mixed ASCII as agents send.
  const text = "duet end-to-end benchmark text, ".repeat(Math.ceil(bytes / 32)).slice(0, bytes);
  const seal: number[] = [];
  const open: number[] = [];
  const check: number[] = [];
  let envelopeBytes = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const key = newRoomKey();
    const code = "k7dq-3mxa-9z2f";
    const sender = E2eSession.start(code, "a", key);
    const receiver = E2eSession.start(code, "b", key);
    const n = perRound(bytes);
    const envelopes: string[] = [];
    seal.push(
      cpuUs(() => {
        for (let i = 0; i < n; i++) envelopes.push(sender.seal(text));
      }) / n,
    );
    check.push(
      cpuUs(() => {
        for (const envelope of envelopes) if (!isE2eEnvelope(envelope)) throw new Error("not an envelope");
      }) / n,
    );
    open.push(
      cpuUs(() => {
        envelopes.forEach((envelope, i) => {
          const opened = receiver.open(String(i + 1), envelope);
          if (!opened.ok || opened.text.length !== text.length) throw new Error("open failed");
        });
      }) / n,
    );
    envelopeBytes = Buffer.byteLength(envelopes[0]!, "utf8");
  }
  const sealUs = median(seal);
  const openUs = median(open);
  return {
    bytes,
    envelopeBytes,
    sealUs,
    openUs,
    formatCheckUs: median(check),
    totalUs: sealUs + openUs,
    mbPerSecond: bytes / (sealUs + openUs),
  };
}

const rows = SIZES.map(measure);
const size = (bytes: number) =>
  bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : bytes >= 1024 ? `${bytes / 1024} KiB` : `${bytes} B`;
const table = [
  `# End-to-end encryption cost per message (SDK)`,
  ``,
  `Machine: ${cpus().length} x ${cpus()[0]?.model.trim() ?? "?"}; Node ${process.version}; ${new Date().toISOString()}${smoke ? " (smoke)" : ""}.`,
  `CPU time (user + system) per message, median of ${ROUNDS} rounds. Seal = sender (HKDF keys are derived once per session;`,
  `AES-256-CTR + HMAC-SHA256 + base64), open = receiver (verify, decrypt, sequence check); the relay's format check`,
  `is what a node adds per send in an encrypted room. Command: \`pnpm --filter @duet/bench build && pnpm --filter @duet/bench e2e-cost\`.`,
  ``,
  `| Text | Envelope (bytes, x text) | seal us | open us | seal + open us | MB/s (seal + open) | relay format check us |`,
  `|---|---|---|---|---|---|---|`,
  ...rows.map(
    (r) =>
      `| ${size(r.bytes)} | ${r.envelopeBytes.toLocaleString("en")} (${(r.envelopeBytes / r.bytes).toFixed(2)} x) | ${r.sealUs.toFixed(1)} | ${r.openUs.toFixed(1)} | ${r.totalUs.toFixed(1)} | ${r.mbPerSecond.toFixed(0)} | ${r.formatCheckUs.toFixed(1)} |`,
  ),
  ``,
].join("\n");
const dir = join(__dirname, "..", "results", smoke ? "smoke" : "");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "e2e-cost.md"), table);
process.stdout.write(table);
