// @duet/testkit: fixtures the duet packages' tests and benchmarks share.
export * from "./ask.js";
export * from "./build.js";
export * from "./buffering-nginx.js";
export * from "./processes.js";
export * from "./redis-server.js";
export * from "./redis-cluster.js";
export * from "./redis-sentinel.js";
export * from "./which.js";
export * from "./netns.js";
export type { PlacedRedis } from "./redis-place.js";
