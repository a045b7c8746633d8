// MAX_WAITERS=auto (src/realtime/admission.ts): the cap from the cgroup's memory limit and the
// open-file limit, as a container or a pod sets them.
import {
  DESCRIPTOR_RESERVE,
  MEMORY_RESERVE_BYTES,
  WAITER_BUDGET_BYTES,
  WaiterAdmission,
  automaticWaiterCap,
  cgroupMemoryLimit,
  openFileLimit,
} from "../../src/realtime/admission";

const files = (contents: Record<string, string>) => (path: string) => {
  if (!(path in contents)) throw Object.assign(new Error(`ENOENT ${path}`), { code: "ENOENT" });
  return contents[path]!;
};

describe("cgroupMemoryLimit", () => {
  it("reads cgroup v2's memory.max, and none for 'max'", () => {
    expect(cgroupMemoryLimit(files({ "/sys/fs/cgroup/memory.max": "536870912\n" }))).toBe(512 * 2 ** 20);
    expect(cgroupMemoryLimit(files({ "/sys/fs/cgroup/memory.max": "max\n" }))).toBeUndefined();
  });
  it("reads cgroup v1's limit, and none for its 'unlimited' page-rounded 2^63", () => {
    const v1 = "/sys/fs/cgroup/memory/memory.limit_in_bytes";
    expect(cgroupMemoryLimit(files({ [v1]: "1073741824" }))).toBe(2 ** 30);
    expect(cgroupMemoryLimit(files({ [v1]: "9223372036854771712" }))).toBeUndefined();
  });
  it("finds none outside a cgroup", () => expect(cgroupMemoryLimit(files({}))).toBeUndefined());
});

it("openFileLimit reads the soft limit from /proc/self/limits", () => {
  const limits = [
    "Limit                     Soft Limit           Hard Limit           Units     ",
    "Max open files            20000                20000                files     ",
  ].join("\n");
  expect(openFileLimit(files({ "/proc/self/limits": limits }))).toBe(20000);
  expect(openFileLimit(files({}))).toBeUndefined();
});

describe("automaticWaiterCap", () => {
  it("a 512 MiB pod: (512 MiB - the reserve) / the budget per waiter", () => {
    const cap = automaticWaiterCap({ memoryBytes: 512 * 2 ** 20, openFiles: 1_048_576 });
    expect(cap.max).toBe(Math.floor((512 * 2 ** 20 - MEMORY_RESERVE_BYTES) / WAITER_BUDGET_BYTES));
    expect(cap.max).toBe(8192);
    expect(cap.from).toContain("memory limit 512 MiB");
  });
  it("the open-file limit when it is the lower", () => {
    expect(automaticWaiterCap({ memoryBytes: 4 * 2 ** 30, openFiles: 20_000 })).toEqual({
      max: 20_000 - DESCRIPTOR_RESERVE,
      from: "open-file limit 20000",
    });
  });
  it("no cap when neither limit is known", () => expect(automaticWaiterCap({}).max).toBeUndefined());
});

describe("WaiterAdmission", () => {
  it("refuses at the cap and is ready again at 90 % of it", () => {
    let held = 0;
    const admission = new WaiterAdmission(10, () => held);
    held = 9;
    expect([admission.admits(), admission.ready()]).toEqual([true, true]);
    held = 10;
    expect([admission.admits(), admission.ready()]).toEqual([false, false]);
    held = 9.5; // between 90 % and the cap: admits, still not ready
    expect([admission.admits(), admission.ready()]).toEqual([true, false]);
    held = 9;
    expect([admission.admits(), admission.ready()]).toEqual([true, true]);
  });
  it("counts places reserved by waiters being set up, until each is given back once", () => {
    const admission = new WaiterAdmission(2, () => 0);
    const first = admission.reserve()!;
    const second = admission.reserve()!;
    expect(admission.reserve()).toBeUndefined();
    first();
    first(); // a second call gives back nothing more
    expect(admission.reserve()).toBeDefined();
    expect(admission.reserve()).toBeUndefined();
    second();
  });
  it("a limit of 1,024 open files keeps a quarter, not all of it", () => {
    expect(automaticWaiterCap({ openFiles: 1024 }).max).toBe(768);
  });
  it("without a cap admits everything", () => {
    expect(new WaiterAdmission(undefined, () => 1e9).admits()).toBe(true);
  });
  it("its refusal is 503 unavailable with Retry-After", () => {
    const error = new WaiterAdmission(1, () => 1).refusal();
    expect([error.status, error.code, error.retryAfterSeconds]).toEqual([503, "unavailable", 2]);
  });
});
