// The jest settings every package shares: TypeScript through swc, the quiet reporter, one
// cache, and the `.js` suffix of NodeNext imports mapped to the source. A package's
// jest.config.cjs spreads this and adds what is its own (setups, timeouts, workers).
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
    "^(\\.{1,2}/.*)\\.js$": "$1", // NodeNext source imports "./app.js"
  },
  // A guard against a hang, not a bound: tests wait for events, and on a busy machine (every
  // CI lane at once) starting a relay, a Redis or a CLI process can take tens of seconds.
  testTimeout: 120_000,
  // Two cores: more workers only make the timing-sensitive tests noisier.
  maxWorkers: 2,
};
