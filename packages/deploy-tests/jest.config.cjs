// Deployment tests. topology.test.ts runs the compose topology from local binaries
// (redis-server, three relays, Debian's nginx); compose.test.ts builds the image and runs
// docker-compose.yml itself on a real Docker engine (test/support/docker-setup.ts brings
// the engine, the compose plugin and the base-image stand-ins while the other files run). Both need `pnpm -r build`;
// `pnpm test` first installs what is missing (infra/scripts/test-prerequisites.mjs).
// DUET_COMPOSE_TEST=off leaves the compose test out, for machines where no engine can run.
const composeOff = process.env.DUET_COMPOSE_TEST === "off";
if (composeOff) process.stderr.write("deploy-tests: DUET_COMPOSE_TEST=off, the compose test is left out\n");

module.exports = {
  ...require("../testkit/jest-base.cjs"),
  testPathIgnorePatterns: composeOff ? ["/node_modules/", "/compose\\.test\\.ts$"] : ["/node_modules/"],
  // The Docker engine comes up in the background (docker-setup.ts); compose.test.ts runs last.
  globalSetup: composeOff ? undefined : "<rootDir>/test/support/docker-setup.ts",
  testSequencer: "<rootDir>/test/support/sequencer.cjs",
  globalTeardown: composeOff ? undefined : "<rootDir>/test/support/docker-teardown.ts",
  testTimeout: 60_000,
  maxWorkers: 1, // one file at a time: the topology test measures a 25 s long-poll
};
