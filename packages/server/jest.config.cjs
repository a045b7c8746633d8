module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  // The browser check needs Chromium and fails without it; DUET_BROWSER_TESTS=off is the
  // one explicit way to leave it out (on a machine where Chromium cannot be installed).
  testPathIgnorePatterns: ["/node_modules/", ...(process.env.DUET_BROWSER_TESTS === "off" ? ["<rootDir>/test/browser/"] : [])],
  transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }] },
  moduleNameMapper: {
    "^@duet/testkit$": "<rootDir>/../testkit/src/index.ts", // shared fixtures, from source
    "^(\\.{1,2}/.*)\\.js$": "$1", // NodeNext source imports "./app.js"
  },
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
  testTimeout: 30_000,
  // Two cores: more workers only make the timing-sensitive tests noisier.
  maxWorkers: 2,
};
