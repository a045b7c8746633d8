#!/usr/bin/env node
// Every repository path named in a comment or a document exists (part of `pnpm lint:infra`).
// Reads the comments of the tracked sources (// and /* */ in TS/JS, -- in Lua, # in shell,
// YAML, Dockerfiles, nginx) and the markdown documents; fails with file:line for:
//  - a path that exists nowhere: a token with a `/` ending in a known extension
//    (`store/redis/scripts.ts`), or starting with a top-level folder (`infra/k8s`). It may be
//    relative to the file's folder or one above it, to a package (packages/*, its src/ or
//    test/), or the end of a tracked path (`lua/open-8.lua`); `.js` may name its `.ts`;
//  - a bare name ending in .ts, .mjs, .lua, .sh or .md that no tracked file has;
//  - a markdown link `[x](path)` that does not resolve from the document (anchors ignored);
//  - `app.ts (createApp)`: the file does not declare that name (a re-export does not count);
//  - "<file> runs this": that file never names this one (the caller a script credits).
// Skipped by rule: URLs; absolute and home paths (/etc/..., /v1/rooms, ~/.cursor); globs and
// placeholders (* { } < > $ in or next to the token); node_modules, dist, dist-*, coverage;
// a dot-folder the repository lacks (.cursor/); relative .js/.cjs paths and bare .js/.cjs
// names (a dependency's or a build's: router/index.js, duet.cjs); a path marked "(new)"; an
// option's value (`--md out.md`); nginx's run-time include folder duet/; the benchmark's
// results/ and CHANGELOG.md (history: paths as they were then); in markdown code blocks,
// all but paths from a top-level folder (`node infra/scripts/gate.mjs`), as examples name
// files of their own.
// Usage: node infra/scripts/check-paths.mjs [root] (root: a git work tree, default this repo).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, posix, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "../.."));

const gitFiles = (...args) =>
  execFileSync("git", ["ls-files", "-z", ...args], { cwd: ROOT, encoding: "utf8" })
    .split("\0")
    .filter((f) => f !== "" && existsSync(join(ROOT, f)));
/** What a reference may name: tracked files, and new ones not ignored (a file not yet added counts). */
const files = gitFiles("--cached", "--others", "--exclude-standard");
/** What is read: tracked files only (a scratch file of one's own is not checked). */
const tracked = gitFiles("--cached");
const fileNames = new Set(files.map((f) => basename(f)));
const topFolders = new Set(files.filter((f) => f.includes("/")).map((f) => f.split("/")[0]));
const packageRoots = [...new Set(files.filter((f) => f.startsWith("packages/")).map((f) => f.split("/", 2).join("/")))];

const SKIPPED_FILES = [/^packages\/bench\/results\//, /^CHANGELOG\.md$/, /(^|\/)node_modules\//, /(^|\/)dist\//];
const EXT = "ts|mts|cts|tsx|js|mjs|cjs|jsx|lua|md|json|jsonc|ya?ml|sh|conf|svg|html|css|txt|cfg|ini|toml|Dockerfile";
const SOURCE_EXT = /\.(ts|mts|cts|mjs|lua|sh|md)$/; // bare names checked against every tracked file
const PATHLIKE = new RegExp(`^[\\w@.-]+(/[\\w@.-]+)*\\.(${EXT})$`);

/** The comment text of each line of a source file, by its kind; undefined for a file with no comments read. */
function commentLines(file, text) {
  if (/\.(ts|mts|cts|tsx|js|mjs|cjs|jsx|jsonc)$/.test(file)) return jsComments(text);
  if (/\.lua$/.test(file)) return lineComments(text, "--");
  if (
    /\.(sh|ya?ml|conf)$|(^|\/)Dockerfile$|\.Dockerfile$|^\.ci\/run$|(^|\/)\.(git|docker)ignore$|^\.(gitattributes|npmrc|editorconfig)$/.test(
      file,
    )
  )
    return lineComments(text, "#");
  return undefined;
}

/** Comments starting with `marker` outside quotes (# only at a line's start or after a space). */
function lineComments(text, marker) {
  return text.split("\n").map((line) => {
    let quote = "";
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quote) {
        if (c === "\\") i++;
        else if (c === quote) quote = "";
      } else if (c === '"' || (c === "'" && marker !== "#")) quote = c;
      else if (line.startsWith(marker, i) && (marker !== "#" || i === 0 || /\s/.test(line[i - 1])))
        return line.slice(i + marker.length);
    }
    return "";
  });
}

/** The // and /* *\/ comments of JavaScript or TypeScript, line by line (strings, templates and regexes skipped). */
function jsComments(text) {
  const out = [""];
  let state = "code"; // code | line | block | ' | " | ` | regex
  let prev = ""; // last significant code character, to tell a regex from a division
  const templateDepth = []; // open ${ } of template literals: braces inside each
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\n") {
      out.push("");
      if (state === "line") state = "code";
      continue;
    }
    if (state === "line" || state === "block") {
      if (state === "block" && c === "*" && text[i + 1] === "/") {
        state = "code";
        i++;
      } else out[out.length - 1] += c;
      continue;
    }
    if (state === "'" || state === '"' || state === "`") {
      if (c === "\\") i++;
      else if (c === state) state = "code";
      else if (state === "`" && c === "$" && text[i + 1] === "{") {
        templateDepth.push(0);
        state = "code";
        i++;
      }
      continue;
    }
    if (state === "regex") {
      if (c === "\\") i++;
      else if (c === "[") {
        while (i < text.length && text[i] !== "]" && text[i] !== "\n") i += text[i] === "\\" ? 2 : 1;
      } else if (c === "/") state = "code";
      continue;
    }
    // code
    if (c === "/" && text[i + 1] === "/") {
      state = "line";
      i++;
    } else if (c === "/" && text[i + 1] === "*") {
      state = "block";
      i++;
    } else if (
      c === "/" &&
      (prev === "" ||
        /[(,=:[!&|?{};+\-*%<>~^]/.test(prev) ||
        /\b(return|typeof|case|in|of)$/.test(text.slice(Math.max(0, i - 8), i).trimEnd()))
    )
      state = "regex";
    else if (c === "'" || c === '"' || c === "`") state = c;
    else if (c === "{" && templateDepth.length > 0) templateDepth[templateDepth.length - 1]++;
    else if (c === "}" && templateDepth.length > 0) {
      if (templateDepth[templateDepth.length - 1] === 0) {
        templateDepth.pop();
        state = "`";
      } else templateDepth[templateDepth.length - 1]--;
    }
    if (state === "code" && !/\s/.test(c)) prev = c;
    else if (state !== "code") prev = c === "/" ? "" : c;
  }
  return out;
}

/** Markdown: every line's text, with fenced code blocks marked (links checked separately). */
function markdownLines(text) {
  let fenced = false;
  return text.split("\n").map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return { text: "", fenced: true };
    }
    return { text: line, fenced };
  });
}

const exists = (rel) => {
  const abs = resolve(ROOT, rel);
  return (abs === ROOT || abs.startsWith(`${ROOT}${sep}`)) && existsSync(abs);
};

/** Whether `path`, named in `file`, resolves to something that exists. */
function resolves(file, named) {
  const path = named.replace(/\/+$/, ""); // a folder: `infra/nginx/compose/`
  const variants = [path];
  if (/\.js$/.test(path)) variants.push(path.replace(/\.js$/, ".ts"), path.replace(/\.js$/, ".d.ts"));
  if (bases(file).some((base) => variants.some((v) => exists(posix.join(base, v))))) return true;
  // The end of a tracked path (`lua/open-8.lua`, `includes/seat.lua`), when it goes down no `..`.
  if (path.startsWith("../")) return false;
  return variants.some((v) => files.some((f) => f.endsWith(`/${v}`) || f.includes(`/${v}/`)));
}

/** The folders a relative path may start from: the file's and those above it, then each package's. */
function bases(file) {
  const out = [];
  for (let dir = posix.dirname(file); ; dir = posix.dirname(dir)) {
    out.push(dir === "." ? "" : dir);
    if (dir === ".") break;
  }
  for (const pkg of packageRoots) out.push(pkg, `${pkg}/src`, `${pkg}/test`);
  return out;
}

/** Paths the repository names but does not hold, by rule (see the header). */
const ELSEWHERE = /^duet\/(listen|upstreams)\.conf$/; // nginx's include folder, mounted from infra/nginx/compose

/** The path-like tokens of a piece of text: [token, "path" | "name"]. */
function candidates(text, { fenced = false } = {}) {
  const found = [];
  const clean = text
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S*/gi, " ") // URLs
    .replace(/\b(localhost|[\w-]+\.(com|org|io|dev|net))(:\d+)?\/\S*/gi, " "); // host/path without a scheme
  for (const m of clean.matchAll(/[^\s`'"()[\]<>,;:|=]+/g)) {
    const before = clean[m.index - 1] ?? "";
    const after = clean.slice(m.index + m[0].length);
    const token = m[0].replace(/[.!?…]+$/, "").replace(/^\.\//, "");
    if (token === "" || /[*{}$<>%#]/.test(token) || /^[/~]/.test(token) || /[/~$]/.test(before)) continue;
    if (/^[<{*$]/.test(after) || /^`?\s*\(new\)/.test(after) || ELSEWHERE.test(token)) continue;
    if (/--[\w-]+[ =]$/.test(clean.slice(0, m.index))) continue; // an option's value: `--md out.md`
    if (/(^|\/)(node_modules|dist|dist-[\w-]+|coverage)(\/|$)/.test(token)) continue;
    const first = token.split("/")[0];
    if (first.startsWith(".") && first !== "." && first !== ".." && !topFolders.has(first)) continue;
    const topLevel = token.includes("/") && topFolders.has(first) && /^[\w./@-]+$/.test(token);
    if (fenced && !topLevel) continue;
    if (!topLevel && /\.c?js$/.test(token)) continue;
    if (topLevel || (token.includes("/") && PATHLIKE.test(token.replace(/^(\.\.\/)+/, ""))))
      found.push([token, "path"]);
    else if (!token.includes("/") && SOURCE_EXT.test(token) && /^[\w][\w.-]*$/.test(token)) found.push([token, "name"]);
  }
  return found;
}

const problems = [];
const report = (file, line, message) => problems.push(`${file}:${line}: ${message}`);

/** `<file> (Name)`: Name is declared in that file (a re-export does not count). */
function checkDefinitions(file, lineNo, text) {
  for (const m of text.matchAll(/([\w./-]+\.(?:ts|mjs|cjs|js)) \(`?([A-Za-z_$][\w$]*)(?:\(\))?`?\)/g)) {
    const [, path, name] = m;
    if (!/[A-Z]/.test(name) && !/[a-z][A-Z]/.test(name)) continue; // a word, not an identifier
    const target = locate(file, path);
    if (target === undefined) continue; // reported as missing already, or not a file
    const source = readFileSync(join(ROOT, target), "utf8");
    const declared = new RegExp(
      `\\b(const|let|var|function\\*?|class|interface|type|enum|namespace)\\s+${name.replace(/\$/g, "\\$")}\\b`,
    );
    if (!declared.test(source)) report(file, lineNo, `${path} (${name}): ${target} does not declare ${name}`);
  }
}

/** `<file> runs this` in a script: that file names the script (its file name, or its name without the key count). */
function checkCallers(file, lineNo, text) {
  for (const m of text.matchAll(/([\w./-]+\.(?:ts|mjs|cjs|js)) (?:runs|calls|evaluates) this\b/g)) {
    const target = locate(file, m[1]);
    if (target === undefined) continue;
    const own = basename(file).replace(/\.\w+$/, "");
    const names = [basename(file), own, own.replace(/-\d+$/, "")];
    const source = readFileSync(join(ROOT, target), "utf8");
    if (!names.some((n) => source.includes(n)))
      report(file, lineNo, `${m[1]} runs this: ${target} never names ${basename(file)}`);
  }
}

/** The repository file a reference in `file` names, or undefined when there is none or several. */
function locate(file, path) {
  if (!path.includes("/")) {
    const matches = files.filter((f) => basename(f) === path);
    const near = matches.filter((f) => f.startsWith(`${posix.dirname(file)}/`));
    const pick = near.length > 0 ? near : matches;
    return pick.length === 1 ? pick[0] : undefined;
  }
  for (const base of bases(file)) {
    for (const v of [path, path.replace(/\.js$/, ".ts")]) {
      const f = posix.join(base, v);
      if (files.includes(f) && statSync(join(ROOT, f)).isFile()) return f;
    }
  }
  return undefined;
}

function checkText(file, lineNo, text, fenced) {
  for (const [token, kind] of candidates(text, { fenced })) {
    if (kind === "path" && !resolves(file, token)) report(file, lineNo, `${token} does not exist`);
    if (kind === "name" && !fileNames.has(token))
      report(file, lineNo, `${token}: no file of the repository has this name`);
  }
  checkDefinitions(file, lineNo, text);
  checkCallers(file, lineNo, text);
}

let scanned = 0;
for (const file of tracked) {
  if (SKIPPED_FILES.some((re) => re.test(file))) continue;
  const text = readFileSync(join(ROOT, file), "utf8");
  if (file.endsWith(".md")) {
    scanned++;
    markdownLines(text).forEach(({ text: line, fenced }, index) => {
      if (!fenced) {
        for (const [, link] of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(link) || link.startsWith("#")) continue;
          const path = link.split("#")[0];
          if (!exists(posix.join(posix.dirname(file), decodeURI(path))))
            report(file, index + 1, `link ${link} does not exist`);
        }
      }
      checkText(file, index + 1, line.replace(/\]\([^)\s]+\)/g, "]"), fenced);
    });
    continue;
  }
  const comments = commentLines(file, text);
  if (comments === undefined) continue;
  scanned++;
  comments.forEach((line, index) => {
    if (line.trim() !== "") checkText(file, index + 1, line, false);
  });
}

if (problems.length > 0) {
  for (const p of problems) console.error(`FAIL ${p}`);
  console.error(`${problems.length} stale reference(s): fix the comment or document (or the path)`);
  process.exit(1);
}
console.log(`ok   paths: every path named in ${scanned} files' comments and documents exists`);
