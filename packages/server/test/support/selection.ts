// What a run of the server's tests uses: the behaviour targets DUET_TARGETS selects, and the
// shared Redis fixtures (one Redis, a Cluster, a Sentinel topology) the selected test files
// need, so the global setup starts those and nothing else. Kept free of the server's code:
// the global setup loads it before anything is built.

/** Every target the behaviour suite knows (support/targets.ts starts them). */
export const TARGET_KINDS = [
  "memory",
  "redis",
  "redis-3-nodes",
  "cluster",
  "cluster-3-nodes",
  "sentinel",
  "process",
] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

/**
 * The targets forEachTarget runs on: DUET_TARGETS as a comma-separated list
 * (`DUET_TARGETS=memory`, `DUET_TARGETS=memory,redis`), every target when it is unset or
 * empty. A name that is no target is an error, not an empty run.
 */
export function selectedTargets(value = process.env.DUET_TARGETS): TargetKind[] {
  const names = (value ?? "")
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean);
  if (names.length === 0) return [...TARGET_KINDS];
  const unknown = names.filter((name) => !(TARGET_KINDS as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new Error(`DUET_TARGETS names ${unknown.join(", ")}; the targets are ${TARGET_KINDS.join(", ")}`);
  return TARGET_KINDS.filter((kind) => names.includes(kind));
}

export type Fixture = "redis" | "cluster" | "sentinel";
export const FIXTURES: readonly Fixture[] = ["redis", "cluster", "sentinel"];

/** The shared fixture a target runs on, and the variable that names it to the workers. */
export const FIXTURE_OF: Record<TargetKind, Fixture | undefined> = {
  memory: undefined,
  redis: "redis",
  "redis-3-nodes": "redis",
  process: "redis",
  cluster: "cluster",
  "cluster-3-nodes": "cluster",
  sentinel: "sentinel",
};
export const VARIABLE_OF: Record<Fixture, string> = {
  redis: "REDIS_URL",
  cluster: "REDIS_CLUSTER_NODES",
  sentinel: "REDIS_SENTINELS",
};

/**
 * The fixtures a test file needs, read from its source:
 * - `forEachTarget`, `forEachTimedTarget` or `BEHAVIOUR_TARGETS`: those of the selected
 *   targets (the timed ones are among them);
 * - a target's name as a string (`startTarget("cluster")`, `kinds: ["redis"]`): that target's;
 * - `process.env.REDIS_URL`, `REDIS_CLUSTER_NODES` or `REDIS_SENTINELS` read directly: that one.
 * Reading more than a file uses only starts a server too many; startTarget names what is missing.
 */
export function fixturesOf(source: string, targets: readonly TargetKind[] = selectedTargets()): Set<Fixture> {
  const kinds = new Set<TargetKind>();
  if (/\bforEach(Timed)?Target\(|\bBEHAVIOUR_TARGETS\b/.test(source)) for (const kind of targets) kinds.add(kind);
  for (const kind of TARGET_KINDS) if (source.includes(`"${kind}"`)) kinds.add(kind);
  const fixtures = new Set<Fixture>();
  for (const kind of kinds) if (FIXTURE_OF[kind]) fixtures.add(FIXTURE_OF[kind]);
  for (const fixture of FIXTURES) if (source.includes(`process.env.${VARIABLE_OF[fixture]}`)) fixtures.add(fixture);
  return fixtures;
}
