// The documentation's cross-references hold: every `docs/protocol.md §N` cited in code,
// tests and docs names a section that exists, and every relative link in the markdown
// points to a file (and heading) that exists.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(__dirname, "../../../..");
const SKIP = new Set(["node_modules", "dist", ".git", "results", "coverage"]);

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (/\.(ts|mjs|cjs|js|lua|md|ya?ml)$/.test(name)) out.push(path);
  }
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");

function headings(path: string): string[] {
  return [...readFileSync(path, "utf8").matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => m[1]!);
}

const files = walk(ROOT);
const protocol = join(ROOT, "docs/protocol.md");

it("every cited section of docs/protocol.md exists", () => {
  const sections = new Set(headings(protocol).flatMap((h) => /^(\d+(?:\.\d+)?)\.?\s/.exec(h)?.[1] ?? []));
  expect(sections.size).toBeGreaterThan(10);
  const missing: string[] = [];
  let cited = 0;
  for (const file of files) {
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, index) => {
        // A line citing the protocol, or any line of the protocol itself: each §N on it.
        if (file !== protocol && !/protocol\.md/.test(line)) return;
        for (const [, section] of line.matchAll(/§(\d+(?:\.\d+)?)/g)) {
          cited++;
          if (!sections.has(section!)) missing.push(`${relative(ROOT, file)}:${index + 1} §${section}`);
        }
      });
  }
  expect(cited).toBeGreaterThan(10);
  expect(missing).toEqual([]);
});

it("every relative link in the markdown points to a file and heading that exist", () => {
  const broken: string[] = [];
  for (const file of files.filter((f) => f.endsWith(".md"))) {
    for (const [, link] of readFileSync(file, "utf8").matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(link!)) continue;
      const [path, anchor] = link!.split("#");
      const target = path ? resolve(dirname(file), path) : file;
      let exists = true;
      try {
        statSync(target);
      } catch {
        exists = false;
      }
      if (!exists) broken.push(`${relative(ROOT, file)}: ${link}`);
      else if (anchor && target.endsWith(".md") && !headings(target).map(anchorOf).includes(anchor))
        broken.push(`${relative(ROOT, file)}: ${link} (no such heading)`);
    }
  }
  expect(broken).toEqual([]);
});
