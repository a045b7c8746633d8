// Jest for @duet/client: unit tests (test/unit/), and integration tests (test/integration/)
// against the real server and the built CLI (built by the global setup when a source is
// newer than the build). Shared settings: packages/testkit/jest-base.cjs.
module.exports = {
  ...require("../testkit/jest-base.cjs"),
  globalSetup: "<rootDir>/test/support/global-setup.ts",
};
