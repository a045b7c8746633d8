// The topology test starts redis-server, three relays and nginx; it needs
// `pnpm -r build` first (packages/server/dist/main.js) and Debian's nginx and
// redis-server (`pnpm test` installs what is missing: infra/scripts/test-prerequisites.mjs).
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }] },
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  testTimeout: 60_000,
  maxWorkers: 1, // the topology test measures a 25 s long-poll; keep the image build off its CPUs
};
