// The relay's listening socket queues LISTEN_BACKLOG connections (docs/configuration.md).
// Node's default of 511 overflowed on this machine when 3,000 clients reconnected to a busy
// node (docs/scaling.md): the kernel then drops handshakes and clients wait for SYN
// retransmissions. The queue length is read from the kernel itself (`ss`: for a listening
// socket, Send-Q is the backlog), capped by net.core.somaxconn as the kernel caps it.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { startTarget, type RelayTarget } from "../support/targets";

const somaxconn = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));

/** The kernel's backlog of the socket listening on this URL's port. */
function kernelBacklog(url: string): number {
  const port = new URL(url).port;
  const line = execFileSync("ss", ["-ltnH", `sport = :${port}`], { encoding: "utf8" }).trim();
  const columns = line.split(/\s+/);
  if (columns[0] !== "LISTEN") throw new Error(`no listening socket on port ${port}: ${JSON.stringify(line)}`);
  return Number(columns[2]);
}

describe("the listening socket's backlog", () => {
  const targets: RelayTarget[] = [];
  afterAll(async () => {
    await Promise.all(targets.map((target) => target.close()));
  });

  it("is 4,096 by default (capped by net.core.somaxconn), not Node's 511", async () => {
    const target = await startTarget("memory");
    targets.push(target);
    expect(kernelBacklog(target.nodes[0]!.url)).toBe(Math.min(4096, somaxconn));
  });

  it("follows LISTEN_BACKLOG", async () => {
    const target = await startTarget("memory", { LISTEN_BACKLOG: "100" });
    targets.push(target);
    expect(kernelBacklog(target.nodes[0]!.url)).toBe(100);
  });
});
