export default async function globalTeardown() {
  await globalThis.__TEST_REDIS_STOP__?.();
}
