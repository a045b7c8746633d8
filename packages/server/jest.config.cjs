module.exports = {
  testEnvironment: "node",
  // Quiet when everything passes; a failing file prints all it would by default. Not
  // verbose even for one file: console output is kept for the reporter, not printed live.
  reporters: ["<rootDir>/../testkit/jest-quiet-reporter.cjs"],
  verbose: false,
  cacheDirectory: "<rootDir>/../../node_modules/.cache/jest", // not in the temp dir
  roots: ["<rootDir>/test"],
  // The browser check needs Chromium and fails without it; DUET_BROWSER_TESTS=off is the
  // one explicit way to leave it out (on a machine where Chromium cannot be installed).
  testPathIgnorePatterns: [
    "/node_modules/",
    ...(process.env.DUET_BROWSER_TESTS === "off" ? ["<rootDir>/test/browser/"] : []),
    // The partition test needs root (network namespaces); DUET_NETNS_TESTS=off leaves it out.
    ...(process.env.DUET_NETNS_TESTS === "off" ? ["<rootDir>/test/reliability/network-partitions"] : []),
    // The official MCP conformance suite needs Node >= 22: it runs on the pinned Node 26, not in the Node 20 lane.
    ...(Number(process.versions.node.split(".")[0]) < 22 ? ["<rootDir>/test/mcp-conformance/"] : []),
  ],
  transform: {
    "^.+\\.ts$": [
      "@swc/jest",
      { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } },
    ],
  },
  moduleNameMapper: {
    "^@duet/testkit$": "<rootDir>/../testkit/src/index.ts", // shared fixtures, from source
    "^(\\.{1,2}/.*)\\.js$": "$1", // NodeNext source imports "./app.js"
  },
  // The global setup starts only the Redis fixtures the selected files need: the sequencer
  // tells it which files those are (DUET_TARGETS narrows the behaviour suite's targets).
  testSequencer: "<rootDir>/../testkit/jest-sequencer.cjs",
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
  // A guard against a hang, not a bound: tests wait for events, and on a busy machine (every
  // CI lane at once) starting a relay or a Redis alone can take tens of seconds.
  testTimeout: 120_000,
  // Two cores: more workers only make the timing-sensitive tests noisier.
  maxWorkers: 2,
};
