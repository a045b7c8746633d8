// Jest for @duet/protocol: the contract on its own (packages/testkit/jest-base.cjs).
module.exports = { ...require("../testkit/jest-base.cjs") };
