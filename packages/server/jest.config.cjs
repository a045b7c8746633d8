// Jest for @duet/server. Shared settings: packages/testkit/jest-base.cjs.
module.exports = {
  ...require("../testkit/jest-base.cjs"),
  // The browser check needs Chromium and fails without it; DUET_BROWSER_TESTS=off is the
  // one explicit way to leave it out (on a machine where Chromium cannot be installed).
  testPathIgnorePatterns: [
    "/node_modules/",
    ...(process.env.DUET_BROWSER_TESTS === "off" ? ["<rootDir>/test/browser/"] : []),
    // The partition test needs root (network namespaces); DUET_NETNS_TESTS=off leaves it out.
    ...(process.env.DUET_NETNS_TESTS === "off" ? ["<rootDir>/test/reliability/network-partitions"] : []),
    // The official MCP conformance suite needs Node >= 22: it runs on the pinned Node 26, never on Node 20.
    ...(Number(process.versions.node.split(".")[0]) < 22 ? ["<rootDir>/test/mcp-conformance/"] : []),
  ],
  // The global setup starts only the Redis fixtures the selected files need: the sequencer
  // tells it which files those are (DUET_TARGETS narrows the behaviour suite's targets).
  testSequencer: "<rootDir>/../testkit/jest-sequencer.cjs",
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
};
