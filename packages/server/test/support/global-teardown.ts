export default async function globalTeardown() {
  await Promise.all([globalThis.__TEST_REDIS_STOP__?.(), globalThis.__TEST_CLUSTER_STOP__?.(), globalThis.__TEST_SENTINEL_STOP__?.()]);
}
