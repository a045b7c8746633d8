// Jest for @duet/client: unit tests, and end-to-end tests against the real server (built
// by the global setup when its dist is missing or older than its sources).
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }] },
  moduleNameMapper: {
    "^@duet/testkit$": "<rootDir>/../testkit/src/index.ts", // shared fixtures, from source
    "^(\\.{1,2}/.*)\\.js$": "$1",
  },
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  testTimeout: 30_000,
  // Two cores: more workers only make the timing-sensitive tests noisier.
  maxWorkers: 2,
};
