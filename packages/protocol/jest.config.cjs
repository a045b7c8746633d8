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
};
