// The topology test starts redis-server, three relays and nginx; it needs
// `pnpm -r build` first (packages/server/dist/main.js) and Debian's nginx and
// redis-server (`pnpm test` installs what is missing: infra/scripts/test-prerequisites.mjs).
module.exports = {
  testEnvironment: "node",
  // Quiet when everything passes; a failing file prints all it would by default. Not
  // verbose even for one file: console output is kept for the reporter, not printed live.
  reporters: ["<rootDir>/../testkit/jest-quiet-reporter.cjs"],
  verbose: false,
  cacheDirectory: "<rootDir>/../../node_modules/.cache/jest", // not in the temp dir
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }] },
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  testTimeout: 60_000,
  maxWorkers: 1, // the topology test measures a 25 s long-poll; keep the image build off its CPUs
};
