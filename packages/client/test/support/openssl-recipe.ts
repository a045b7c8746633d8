// The openssl recipe of docs/encryption.md, run as the docs show it (through bash).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const DOCS = join(__dirname, "../../../../docs/encryption.md");

/** The sh block of docs/encryption.md that defines duet_seal and duet_open. */
export function opensslRecipe(): string {
  const docs = readFileSync(DOCS, "utf8");
  const match = /<!-- duet-e2e recipe[^>]*-->\n```sh\n([\s\S]*?)```/.exec(docs);
  if (!match) throw new Error("docs/encryption.md has no recipe block");
  return match[1]!;
}

/**
 * Known-answer tests only: makes `openssl rand -base64 16` print $FIXED_IV, so the recipe's
 * envelope can be compared with a vector. Real senders never fix the iv.
 */
export const FIXED_IV_PRELUDE = `openssl() { if [ "$1" = rand ]; then printf '%s\\n' "$FIXED_IV"; else command openssl "$@"; fi; }`;

/** Runs `script` after the recipe in bash with only PATH and `env`; throws when it fails. */
export function runRecipe(script: string, env: Record<string, string>, prelude = ""): string {
  return execFileSync("bash", ["-c", `set -e\n${prelude}\n${opensslRecipe()}\n${script}`], {
    env: { PATH: process.env.PATH!, ...env },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}
