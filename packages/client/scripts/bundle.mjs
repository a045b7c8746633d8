// Builds dist/bundle/: duet.cjs, the whole duet CLI (with commander, zod and @duet/protocol)
// in one file that needs only Node 20, beside SKILL.md and a package.json without
// dependencies. The relay serves the two files to agents on machines without a checkout
// (GET /v1/cli/duet.cjs, GET /v1/skill.md); `pnpm install-cli` installs the folder with npm.
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const bundleDir = join(packageDir, "dist", "bundle");
const outfile = join(bundleDir, "duet.cjs");
const { version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));

/**
 * zod's `z.locales` (every language's error messages, 321 KB of the minified bundle) as
 * English only: the CLI never switches zod's locale, and the default English one is
 * required by zod directly (classic/schemas.cjs), not through this index.
 */
const englishZodLocalesOnly = {
  name: "english-zod-locales-only",
  setup(plugin) {
    plugin.onResolve({ filter: /^\.\.\/locales\/index\.c?js$/ }, ({ importer, resolveDir }) => {
      if (!/[\\/]node_modules[\\/]zod[\\/]/.test(importer)) return undefined;
      return { path: join(resolveDir, "..", "locales", "en.cjs"), namespace: "zod-locales" };
    });
    plugin.onLoad({ filter: /.*/, namespace: "zod-locales" }, ({ path }) => ({
      contents: `exports.en = require(${JSON.stringify(path)}).default;`,
      loader: "js",
      resolveDir: dirname(path),
    }));
  },
};

const { metafile } = await build({
  entryPoints: [join(packageDir, "src", "cli", "main.ts")],
  outfile,
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  // main.ts starts with "#!/usr/bin/env node", which esbuild keeps at the top of the bundle.
  // Minified: the relay serves it to every agent that joins (1.27 MB plain before; the
  // source is in the repository, and the relay also serves it compressed).
  minify: true,
  plugins: [englishZodLocalesOnly],
  legalComments: "none",
  // After the "#!/usr/bin/env node" line, which esbuild keeps first.
  banner: {
    js: `// duet CLI ${version}. Copyright the duet authors. Licensed under the Apache License 2.0 (Apache-2.0).`,
  },
  logLevel: "warning",
  metafile: true,
});
// One copy of each dependency: a value import of "zod" in the client's own source resolves
// to zod's ESM build beside the CommonJS one @duet/protocol's build requires (0.8 MB more).
const zodBuilds = new Set(
  Object.keys(metafile.inputs)
    .filter((path) => /\/node_modules\/zod\//.test(path))
    .map((path) => (path.endsWith(".cjs") ? "cjs" : "esm")),
);
if (zodBuilds.size > 1)
  throw new Error(
    "dist/bundle/duet.cjs holds zod twice (ESM and CommonJS): import only types from zod in packages/client/src",
  );
// The relay writes its base URL over this literal as it serves the file (src/cli/served.ts).
const servedMarker = '"__DUET_SERVED_FROM__"';
const bundled = readFileSync(outfile);
if (bundled.toString("utf8").split(servedMarker).length !== 2)
  throw new Error(`dist/bundle/duet.cjs must hold ${servedMarker} exactly once (src/cli/served.ts)`);
// What the relay serves to every agent that joins: bounded (docs/cli.md).
const MAX_PLAIN_BYTES = 400 * 1024;
const MAX_GZIP_BYTES = 150 * 1024;
const gzipped = gzipSync(bundled, { level: 9 }).length;
if (bundled.length > MAX_PLAIN_BYTES || gzipped > MAX_GZIP_BYTES)
  throw new Error(
    `dist/bundle/duet.cjs is ${bundled.length} bytes (${gzipped} gzipped): at most ${MAX_PLAIN_BYTES} (${MAX_GZIP_BYTES} gzipped)`,
  );
chmodSync(outfile, 0o755);
// The skill as agents read it: without the markers of its generated lists (docs-generate.mjs).
writeFileSync(
  join(bundleDir, "SKILL.md"),
  readFileSync(join(packageDir, "SKILL.md"), "utf8").replace(/<!-- \/?generated(?::[a-z0-9:_-]+)? -->/g, ""),
);
const manifest = {
  name: "@duet/cli",
  version,
  description: "The duet CLI as one file (built from packages/client); installed by `pnpm install-cli`",
  private: true,
  bin: { duet: "duet.cjs" },
  files: ["duet.cjs", "SKILL.md"],
  license: "Apache-2.0",
  engines: { node: ">=20" },
};
writeFileSync(join(bundleDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
