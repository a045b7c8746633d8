// Relays in the test process on a store of the test's own, for the fault tests that fail
// that store over under traffic (redis-failover, fault-search): rate limits and the stats
// cache off, a key prefix of their own, and only their error log lines kept.
import { Writable } from "node:stream";
import { loadConfig, type Config } from "../../src/config";
import { createLogger } from "../../src/logger";
import { startRelay, type RunningRelay } from "../../src/relay";
import type { History } from "./history";
import { TestClient } from "./http-client";
import { uniquePrefix, waitUntilReady } from "./targets";
import { type Room, runRoomsWorkload } from "./workload";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Relays in this process on one store (two by default), each restartable on its own port;
 * their error log lines are kept (an internal error names its cause there).
 */
export class Relays {
  readonly errors: string[] = [];
  nodes: RunningRelay[] = [];
  client!: TestClient;
  /** The store's key prefix, of this set of relays alone. */
  readonly prefix = uniquePrefix();
  private config!: Config;

  async start(env: Record<string, string>, count = 2) {
    this.config = loadConfig({
      HOST: "127.0.0.1",
      PORT: "0",
      METRICS_PORT: "0",
      RATE_LIMIT_REQUESTS: "0",
      RATE_LIMIT_ROOMS: "0",
      STATS_CACHE_MS: "0",
      REDIS_KEY_PREFIX: this.prefix,
      ...env,
    });
    for (let i = 0; i < count; i++) this.nodes.push(await startRelay(this.config, this.logger()));
    await Promise.all(this.nodes.map((node) => waitUntilReady(node.url)));
    this.client = new TestClient(this.nodes.map((node) => node.url));
  }

  private logger() {
    const sink = new Writable({
      write: (chunk, _enc, done) => {
        if (this.errors.length < 20) this.errors.push(chunk.toString().slice(0, 600));
        done();
      },
    });
    return createLogger("error", sink);
  }

  /** Stops relay `i` (it drains) and starts it again on the same port. */
  async restart(i: number) {
    const old = this.nodes[i]!;
    const port = Number(new URL(old.url).port);
    await old.shutdown();
    for (let attempt = 1; ; attempt++) {
      try {
        this.nodes[i] = await startRelay({ ...this.config, port }, this.logger());
        break;
      } catch (error) {
        if (attempt >= 20) throw error;
        await sleep(100);
      }
    }
    await waitUntilReady(this.nodes[i]!.url);
  }

  /**
   * Traffic in every room through these relays (through them as they are now: a restarted
   * one keeps its port): each seat sends a message every 40 ms until `stopSending`, and
   * every call goes to `history`.
   */
  traffic(rooms: Room[], history: History, deadline: number, stopSending: () => boolean) {
    return runRoomsWorkload(rooms, { client: this.client, history, sendGapMs: 40, deadline, stopSending });
  }

  close = async () => void (await Promise.all(this.nodes.map((node) => node.shutdown())));
}
