// Jest for @duet/client: unit tests (test/unit/), and integration tests (test/integration/)
// against the real server and the built CLI (built by the global setup when a source is
// newer than the build).
module.exports = {
  testEnvironment: "node",
  // Quiet when everything passes; a failing file prints all it would by default. Not
  // verbose even for one file: console output is kept for the reporter, not printed live.
  reporters: ["<rootDir>/../testkit/jest-quiet-reporter.cjs"],
  verbose: false,
  cacheDirectory: "<rootDir>/../../node_modules/.cache/jest", // not in the temp dir
  roots: ["<rootDir>/test"],
  transform: {
    "^.+\\.ts$": [
      "@swc/jest",
      { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } },
    ],
  },
  moduleNameMapper: {
    "^@duet/testkit$": "<rootDir>/../testkit/src/index.ts", // shared fixtures, from source
    "^(\\.{1,2}/.*)\\.js$": "$1",
  },
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  // A guard against a hang, not a bound: tests wait for events, and on a busy machine (every
  // CI lane at once) starting a relay or a CLI process can take tens of seconds.
  testTimeout: 120_000,
  // Two cores: more workers only make the timing-sensitive tests noisier.
  maxWorkers: 2,
};
