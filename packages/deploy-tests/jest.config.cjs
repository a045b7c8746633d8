// Deployment tests. topology.test.ts runs the compose topology from local binaries
// (redis-server, three relays, Debian's nginx); compose.test.ts builds the image and runs
// docker-compose.yml itself on a real Docker engine (test/support/docker-setup.ts brings
// the engine, the compose plugin and the base-image stand-ins while the other files run). Both need `pnpm -r build`;
// `pnpm test` first installs what is missing (infra/scripts/test-prerequisites.mjs).
// DUET_COMPOSE_TEST=off leaves the compose test out, for machines where no engine can run.
const composeOff = process.env.DUET_COMPOSE_TEST === "off";
if (composeOff) process.stderr.write("deploy-tests: DUET_COMPOSE_TEST=off, the compose test is left out\n");

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
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  testPathIgnorePatterns: composeOff ? ["/node_modules/", "/compose\\.test\\.ts$"] : ["/node_modules/"],
  // The Docker engine comes up in the background (docker-setup.ts); compose.test.ts runs last.
  globalSetup: composeOff ? undefined : "<rootDir>/test/support/docker-setup.ts",
  testSequencer: "<rootDir>/test/support/sequencer.cjs",
  globalTeardown: composeOff ? undefined : "<rootDir>/test/support/docker-teardown.ts",
  testTimeout: 60_000,
  maxWorkers: 1, // one file at a time: the topology test measures a 25 s long-poll
};
