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

/** Runs `script` after the recipe in bash with only PATH and `env`; throws when it fails. */
export function runRecipe(script: string, env: Record<string, string>): string {
  return execFileSync("bash", ["-c", `set -e\n${opensslRecipe()}\n${script}`], {
    env: { PATH: process.env.PATH!, ...env },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}
