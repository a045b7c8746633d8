// When Redis last said anything on a connection. A connection is judged dead by silence, not
// by how long one command took: on a slow but healthy link (300 ms each way, say) ioredis's
// auto-pipelining holds a command until the pipeline before it has settled, so a command can
// take two round trips while replies keep arriving. Only a link that has answered nothing for
// a whole timeout is gone (a hung master, a partition, a black hole).
import type { Redis } from "ioredis";

export class ReplyClock {
  private heardAt = performance.now();

  /** Counts every byte Redis sends on this client's connections, now and after each reconnect. */
  watch(client: Redis): this {
    const listen = () => {
      const socket = client.stream;
      // Each connect makes a new socket; ioredis reads it with a listener of its own.
      socket?.on("data", this.heard);
    };
    client.on("connect", listen);
    if (client.stream) listen();
    return this;
  }

  /** Milliseconds since Redis last sent anything, counted from `since` at the latest. */
  silentFor(since = Number.NEGATIVE_INFINITY): number {
    return performance.now() - Math.max(this.heardAt, since);
  }

  private readonly heard = () => {
    this.heardAt = performance.now();
  };
}

/**
 * How much longer a store call may wait once its timeout is up: none if Redis has been
 * silent for a whole timeout (the call answers 503 at its timeout, as when Redis is gone),
 * else until the link falls silent for that long, and never past twice the timeout. Twice:
 * auto-pipelining holds a command until the pipeline before it settles (at most one
 * timeout, by ioredis's command timeout), and the command then has its own timeout.
 */
export function patience(clock: ReplyClock, timeoutMs: number): (waitedMs: number) => number {
  return (waitedMs) => {
    const silentMs = clock.silentFor();
    if (silentMs >= timeoutMs) return 0;
    return Math.min(timeoutMs - silentMs, 2 * timeoutMs - waitedMs);
  };
}
