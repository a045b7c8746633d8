// MAX_WAITERS=auto (src/realtime/admission.ts): the cap from the cgroup's memory limit and the
// open-file limit, as a container or a pod sets them.
import {
  DESCRIPTOR_RESERVE,
  MEMORY_RESERVE_BYTES,
  NO_CAP_PER_CLIENT,
  WAITER_BUDGET_BYTES,
  WaiterAdmission,
  automaticWaiterCap,
  cgroupMemoryLimit,
  openFileLimit,
  perClientBound,
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
  it("refuses at the cap, whoever asks, until a place is given back", () => {
    const admission = new WaiterAdmission(3);
    const places = ["a", "b", "c"].map((client) => admission.reserve(client) as () => void);
    expect(admission.held).toBe(3);
    expect(admission.reserve("d")).toBe("node");
    places[0]!();
    expect(typeof admission.reserve("d")).toBe("function");
  });
  it("one client holds at most its bound; other clients are still admitted", () => {
    const admission = new WaiterAdmission(10, 2);
    const mine = [admission.reserve("203.0.113.7"), admission.reserve("203.0.113.7")];
    expect(admission.reserve("203.0.113.7")).toBe("client");
    expect(typeof admission.reserve("198.51.100.1")).toBe("function");
    expect(admission.heldBy("203.0.113.7")).toBe(2);
    (mine[0] as () => void)();
    expect(admission.heldBy("203.0.113.7")).toBe(1);
    expect(typeof admission.reserve("203.0.113.7")).toBe("function");
  });
  it("a place is given back once, however often its release is called", () => {
    const admission = new WaiterAdmission(2);
    const first = admission.reserve("a") as () => void;
    const second = admission.reserve("a") as () => void;
    expect(admission.reserve("a")).toBe("node");
    first();
    first(); // a second call gives back nothing more
    expect(admission.held).toBe(1);
    expect(typeof admission.reserve("a")).toBe("function");
    expect(admission.reserve("a")).toBe("node");
    second();
  });
  it("a limit of 1,024 open files keeps a quarter, not all of it", () => {
    expect(automaticWaiterCap({ openFiles: 1024 }).max).toBe(768);
  });
  it("without a cap or a bound admits everything", () => {
    const admission = new WaiterAdmission(undefined);
    for (let i = 0; i < 10_000; i++) expect(typeof admission.reserve("a")).toBe("function");
  });
  it("MAX_WAITERS_PER_CLIENT=auto is an eighth of the cap (at least 1), 1,024 without a cap", () => {
    expect(perClientBound("auto", 8192)).toBe(1024);
    expect(perClientBound("auto", 200)).toBe(25);
    expect(perClientBound("auto", 5)).toBe(1);
    expect(perClientBound("auto", undefined)).toBe(NO_CAP_PER_CLIENT);
    expect(perClientBound(40, 200)).toBe(40);
    expect(perClientBound("off", 200)).toBeUndefined();
  });
  it("at the cap: 503 unavailable, Retry-After 2; past the client's bound: 429 too_many_waiters, Retry-After 5", () => {
    const admission = new WaiterAdmission(1, 1);
    const node = admission.refusal("node");
    expect([node.status, node.code, node.retryAfterSeconds]).toEqual([503, "unavailable", 2]);
    const client = admission.refusal("client");
    expect([client.status, client.code, client.retryAfterSeconds]).toEqual([429, "too_many_waiters", 5]);
    expect(admission.refused).toBe(1);
  });
});
