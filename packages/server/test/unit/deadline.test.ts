// within(): the one bounded wait behind store calls, rate-limit counts, subscription
// confirmations and the shutdown drain.
import { within } from "../../src/deadline";

const never = () => new Promise<never>(() => undefined);
const timeouts = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;

it("settles as the work does when it comes first, and clears its timer", async () => {
  const before = timeouts();
  await expect(within(Promise.resolve("done"), 60_000, () => "late")).resolves.toBe("done");
  await expect(within(Promise.reject(new Error("broke")), 60_000, () => "late")).rejects.toThrow("broke");
  expect(timeouts()).toBe(before);
});

it("settles as the fallback does once the time is up: its value, or what it throws", async () => {
  await expect(within(never(), 5, () => "fallback")).resolves.toBe("fallback");
  await expect(
    within(never(), 5, () => {
      throw new Error("timed out");
    }),
  ).rejects.toThrow("timed out");
});

it("maps the work's failures, thrown at once or rejected, but not the fallback's", async () => {
  const mapError = (error: unknown) => new Error(`mapped: ${(error as Error).message}`);
  const throwsAtOnce = (): Promise<string> => {
    throw new Error("sync");
  };
  await expect(within(throwsAtOnce, 60_000, () => "late", { mapError })).rejects.toThrow("mapped: sync");
  await expect(within(Promise.reject(new Error("async")), 60_000, () => "late", { mapError })).rejects.toThrow(
    "mapped: async",
  );
  const timedOut = () => {
    throw new Error("timed out");
  };
  await expect(within(never(), 5, timedOut, { mapError })).rejects.toThrow(/^timed out$/);
});

it("an unref'd bound does not keep the process alive", async () => {
  const { spawnSync } = await import("node:child_process");
  const script = `require(${JSON.stringify(require.resolve("../../dist/deadline.js"))}).within(new Promise(() => {}), 60000, () => 0, { unref: true }).then(() => process.exit(3));`;
  // Held alive by the timer, it would exit 3 after 60 s, or be killed at 30 s.
  const child = spawnSync(process.execPath, ["-e", script], { timeout: 30_000 });
  expect({ status: child.status, signal: child.signal }).toEqual({ status: 0, signal: null });
});
