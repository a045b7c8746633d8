// Real network partitions for tests: a private network of Linux network namespaces, one per
// test host, each joined by a veth link to a bridge in a hub namespace of its own. Nothing
// touches the machine's own network: the addresses (10.x.y.z) exist only inside namespaces
// this module creates, named `duetha-<pid>-<random>-<host>`, and every one of them is
// deleted at destroy(), when the test process exits, and (for a process that died without
// doing so) by the next createNetwork on the machine.
//
// A cut drops packets silently in both directions (iptables DROP of what arrives, inside
// each side's namespace), as a real partition does: connections hang, nothing is reset, and a heal
// lets TCP deliver what it was retransmitting. Needs root, `ip` (iproute2) and iptables.
import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { which } from "./which.js";

const run = promisify(execFile);
const PREFIX = "duetha";

export interface NetHost {
  name: string;
  /** The namespace's name (for `ip netns exec`). */
  ns: string;
  /** Its address on the test network. */
  address: string;
}

export interface TestNetwork {
  hosts: Map<string, NetHost>;
  host(name: string): NetHost;
  /** Drops every packet between each host of `a` and each host of `b` (both ways), on top of earlier cuts. */
  cut(a: string[], b: string[]): Promise<void>;
  /** Cuts `host` from every other host. */
  isolate(host: string): Promise<void>;
  /** Lifts every cut. */
  heal(): Promise<void>;
  /** Pairs of hosts cut from each other right now. */
  cuts(): [string, string][];
  /** Starts a program inside a host's namespace (`ip netns exec`: the child's pid is the program's). */
  spawn(host: string, command: string, args: string[], options?: SpawnOptions): ChildProcess;
  /** Runs a program inside a host's namespace and returns its stdout. */
  exec(host: string, command: string, args: string[], timeoutMs?: number): Promise<string>;
  /** Deletes every namespace (and with them the links). Processes inside are the caller's to end first. */
  destroy(): Promise<void>;
}

/** Why network namespaces cannot be used here, or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.platform !== "linux") return "network namespaces need Linux";
  if (process.getuid?.() !== 0) return "network namespaces need root (ip netns add)";
  if (!which("ip")) return "`ip` (iproute2) is not on PATH";
  if (!which("iptables") && !which("iptables-nft")) return "iptables is not on PATH";
  return undefined;
}

const live = new Set<string>();
let exitHookInstalled = false;
function deleteOnExit(ns: string) {
  live.add(ns);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const name of live) {
      try {
        execFileSync("ip", ["netns", "del", name], { stdio: "ignore" });
      } catch {
        // already gone
      }
    }
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** Deletes namespaces this module created in processes that are gone (a test run killed mid-way). */
async function sweepStale(): Promise<void> {
  const { stdout } = await run("ip", ["netns", "list"]);
  for (const line of stdout.split("\n")) {
    const name = line.split(" ")[0] ?? "";
    const match = new RegExp(`^${PREFIX}-(\\d+)-`).exec(name);
    if (match && !alive(Number(match[1]))) await run("ip", ["netns", "del", name]).catch(() => undefined);
  }
}

const ip = (args: string[]) => run("ip", args, { timeout: 10_000 });

/**
 * A network of `hostNames`, all able to reach each other until cut. Each host gets an
 * address 10.<a>.<b>.<10 + i>/24 (a, b random: several networks may exist at once).
 */
export async function createNetwork(hostNames: string[]): Promise<TestNetwork> {
  const reason = netnsUnavailable();
  if (reason) throw new Error(reason);
  if (hostNames.length > 200) throw new Error("at most 200 hosts");
  await sweepStale();
  const id = `${PREFIX}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const hub = `${id}-hub`;
  const subnet = `10.${100 + Math.floor(Math.random() * 100)}.${Math.floor(Math.random() * 250)}`;
  const hosts = new Map<string, NetHost>();
  const created: string[] = [];
  const destroy = async () => {
    await Promise.all(
      created.map(async (ns) => {
        await ip(["netns", "del", ns]).catch(() => undefined);
        live.delete(ns);
      }),
    );
  };
  try {
    const addNs = async (ns: string) => {
      await ip(["netns", "add", ns]);
      created.push(ns);
      deleteOnExit(ns);
      await ip(["-n", ns, "link", "set", "lo", "up"]);
    };
    await addNs(hub);
    await ip(["-n", hub, "link", "add", "br0", "type", "bridge"]);
    await ip(["-n", hub, "link", "set", "br0", "up"]);
    let i = 0;
    for (const name of hostNames) {
      if (!/^[a-z][a-z0-9]{0,11}$/.test(name)) throw new Error(`host name ${name}: a-z0-9, at most 12`);
      const ns = `${id}-${name}`;
      const address = `${subnet}.${10 + i}`;
      await addNs(ns);
      // Created directly in the two namespaces: no interface ever exists in the machine's own.
      await ip(["link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", `p${i}`, "netns", hub]);
      await ip(["-n", hub, "link", "set", `p${i}`, "master", "br0"]);
      await ip(["-n", hub, "link", "set", `p${i}`, "up"]);
      await ip(["-n", ns, "addr", "add", `${address}/24`, "dev", "eth0"]);
      await ip(["-n", ns, "link", "set", "eth0", "up"]);
      hosts.set(name, { name, ns, address });
      i++;
    }
  } catch (error) {
    await destroy();
    throw error;
  }

  const blocked = new Map<string, Set<string>>([...hosts.keys()].map((name) => [name, new Set<string>()]));
  const host = (name: string) => {
    const found = hosts.get(name);
    if (!found) throw new Error(`no host ${name} on this network`);
    return found;
  };
  /**
   * Writes a host's whole filter table: DROP what arrives from every peer it is cut from.
   * Only on the way in (cuts are always symmetric, so the peer drops what this host sends):
   * a DROP on the way out would fail the sender's own send with EPERM, which no real
   * partition does.
   */
  const applyRules = async (name: string) => {
    const rules = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"];
    for (const peer of blocked.get(name)!) rules.push(`-A INPUT -s ${host(peer).address}/32 -j DROP`);
    rules.push("COMMIT", "");
    await new Promise<void>((resolve, reject) => {
      const child = spawn("ip", ["netns", "exec", host(name).ns, "iptables-restore"], {
        stdio: ["pipe", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr!.on("data", (chunk) => (stderr += chunk));
      child.once("error", reject);
      child.once("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`iptables-restore in ${name}: ${code} ${stderr}`)),
      );
      child.stdin!.end(rules.join("\n"));
    });
  };

  const network: TestNetwork = {
    hosts,
    host,
    async cut(a, b) {
      const touched = new Set<string>();
      for (const x of a)
        for (const y of b) {
          if (x === y) continue;
          host(x);
          host(y);
          blocked.get(x)!.add(y);
          blocked.get(y)!.add(x);
          touched.add(x).add(y);
        }
      await Promise.all([...touched].map(applyRules));
    },
    isolate(name) {
      return network.cut(
        [name],
        [...hosts.keys()].filter((other) => other !== name),
      );
    },
    async heal() {
      const touched = [...blocked].filter(([, peers]) => peers.size > 0).map(([name]) => name);
      for (const name of touched) blocked.get(name)!.clear();
      await Promise.all(touched.map(applyRules));
    },
    cuts() {
      const pairs: [string, string][] = [];
      for (const [x, peers] of blocked) for (const y of peers) if (x < y) pairs.push([x, y]);
      return pairs;
    },
    spawn(name, command, args, options = {}) {
      return spawn("ip", ["netns", "exec", host(name).ns, command, ...args], options);
    },
    async exec(name, command, args, timeoutMs = 30_000) {
      const { stdout } = await run("ip", ["netns", "exec", host(name).ns, command, ...args], { timeout: timeoutMs });
      return stdout;
    },
    destroy,
  };
  return network;
}
