// The client's version has one home: this package's package.json. tsc's output reads it at
// run time (dist/ sits beside it); the one-file CLI bundle has it inlined by esbuild, which
// resolves this literal require from the source file.
const manifest: { version: string } = require("../package.json");

export const CLIENT_VERSION: string = manifest.version;
