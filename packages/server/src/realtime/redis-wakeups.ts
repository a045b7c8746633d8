// Cross-node wake-ups over Redis sharded pub/sub: one subscriber connection per node, a room's
// channel subscribed for its first local waiter and unsubscribed LINGER_MS after its last. A
// message is only a wake-up: waiters re-read Redis. A wake-up is lost only with the subscriber
// connection, so every waiter re-reads when it reconnects (resyncAll, 'subscribersReady' on a
// cluster) and the heartbeat in store/redis/connection.ts replaces a silently dead one.
// docs/streams.md, "Cheaper waiting, for recv and stream alike".
import { Redis, type Cluster } from "ioredis";
import { setTimeout as delay } from "node:timers/promises";
import { within } from "../deadline.js";
import { apiError } from "../errors.js";
import type { WakeEvent, WakeupBus } from "../store/room-store.js";

type Listener = (event: WakeEvent) => void;

interface Subscription {
  listeners: Set<Listener>;
  confirmed: Promise<unknown>;
  /** Redis confirmed the SSUBSCRIBE: wake-ups flow. */
  live: boolean;
  idleTimer?: NodeJS.Timeout;
}

// A room's channel stays subscribed this long after its last waiter left. Agents loop recv
// after recv, so the next recv finds the channel subscribed: it listens before its one read
// and costs no SSUBSCRIBE, no second read and no SUNSUBSCRIBE.
const LINGER_MS = 30_000;

/** After a reconnect, waiters re-read this many at a time (see resyncAll)… */
export const RESYNC_BATCH = 500;
/** …one batch every this many ms: 19,000 waiters in under 0.8 s. */
const RESYNC_GAP_MS = 20;

export class RedisWakeupBus implements WakeupBus {
  private readonly subscriptions = new Map<string, Subscription>();
  private connectedOnce = false;
  private closed = false;

  constructor(
    private readonly subscriber: Redis | Cluster,
    private readonly channelOf: (code: string) => string,
    private readonly lingerMs = LINGER_MS,
    /**
     * Longest wait for a subscription's confirmation. The subscriber connection has no
     * command timeout, and a Redis that stopped answering would otherwise hold a recv
     * past its wait for as long as the outage lasts.
     */
    private readonly confirmTimeoutMs = 2000,
  ) {
    subscriber.on("smessage", (channel: string, message: string) => this.deliver(channel, message as WakeEvent));
    // After a reconnect, wake-ups sent while we were away are lost: every waiter re-reads.
    subscriber.on("ready", () => {
      if (this.connectedOnce) void this.afterResubscribe().then(() => this.resyncAll());
      this.connectedOnce = true;
    });
    if (!(subscriber instanceof Redis)) {
      // A shard subscriber replaced (killed, failed over): ioredis re-sends the node's
      // subscriptions without telling when they are confirmed; a short pause, then re-read.
      subscriber.on("subscribersReady", () => void delay(500).then(() => this.resyncAll()));
    }
  }

  /**
   * The store is closing: the lingering channels' timers go, so no SUNSUBSCRIBE is sent on a
   * closed client (a cluster's subscriber group would open a shard connection for it, which
   * then retries for ever once Redis is gone, and keeps the process alive).
   */
  close(): void {
    this.closed = true;
    for (const subscription of this.subscriptions.values()) clearTimeout(subscription.idleTimer);
    this.subscriptions.clear();
  }

  /** Channels this node is subscribed to right now (for tests and metrics). */
  get channelCount(): number {
    return this.subscriptions.size;
  }

  /** Subscribed and confirmed (a waiter or a lingering subscription). */
  isListening(code: string): boolean {
    return this.subscriptions.get(this.channelOf(code))?.live === true;
  }

  async watch(code: string, listener: Listener): Promise<() => void> {
    const channel = this.channelOf(code);
    let subscription = this.subscriptions.get(channel);
    if (!subscription) {
      const created: Subscription = {
        listeners: new Set(),
        confirmed: this.subscriber.ssubscribe(channel),
        live: false,
      };
      created.confirmed.then(
        () => (created.live = true),
        () => {
          // Refused or dropped: the next waiter subscribes again.
          if (this.subscriptions.get(channel) !== created) return;
          clearTimeout(created.idleTimer);
          this.subscriptions.delete(channel);
        },
      );
      subscription = created;
      this.subscriptions.set(channel, subscription);
    } else if (subscription.idleTimer) {
      clearTimeout(subscription.idleTimer);
      subscription.idleTimer = undefined;
    }
    subscription.listeners.add(listener);
    const stop = () => this.unwatch(channel, subscription, listener);
    // A confirmed subscription (the common case: the channel lingers between recvs) has
    // nothing to wait for.
    if (subscription.live) return stop;
    try {
      await within(subscription.confirmed, this.confirmTimeoutMs, () => {
        throw new Error("subscription not confirmed");
      });
    } catch {
      // Not confirmed in time: this waiter gets 503, and the subscription lingers as after a
      // last waiter, so a late confirmation makes it live for the next recv (the linger's
      // SUNSUBSCRIBE queues behind the SSUBSCRIBE on the same connection when nobody comes).
      // Dropping it here made every recv on a slow shard start a new SSUBSCRIBE and give up
      // on it again, for as long as confirmations took longer than the wait for them.
      stop();
      const unavailable = apiError("unavailable");
      unavailable.retryAfterSeconds = 1;
      throw unavailable;
    }
    return stop;
  }

  private unwatch(channel: string, subscription: Subscription, listener: Listener): void {
    if (!subscription.listeners.delete(listener) || subscription.listeners.size > 0) return;
    if (this.closed || this.subscriptions.get(channel) !== subscription) return;
    subscription.idleTimer = setTimeout(() => {
      if (subscription.listeners.size > 0 || this.subscriptions.get(channel) !== subscription) return;
      this.subscriptions.delete(channel);
      // Commands on one connection run in order, so a later SSUBSCRIBE of the same channel
      // lands after this SUNSUBSCRIBE and wins.
      this.subscriber.sunsubscribe(channel).catch(() => undefined);
    }, this.lingerMs);
    subscription.idleTimer.unref();
  }

  private deliver(channel: string, event: WakeEvent): void {
    const subscription = this.subscriptions.get(channel);
    if (!subscription) return;
    for (const listener of [...subscription.listeners]) listener(event);
  }

  // On one Redis we re-send the subscriptions ourselves after a reconnect (the client is
  // made with autoResubscribe off: its own re-sends leave rejected promises unhandled, which
  // ends the process when the connection drops again before they are confirmed). A PING
  // queued behind them answers once they are confirmed, so a re-read after it cannot miss a
  // send. (A cluster's shard subscribers are restored by ioredis's subscriber group and have
  // no such handle: a short pause, then the safety re-check covers the rest.)
  private async afterResubscribe(): Promise<void> {
    if (this.subscriber instanceof Redis) {
      const subscriber = this.subscriber;
      await Promise.all(
        [...this.subscriptions.keys()].map((channel) => subscriber.ssubscribe(channel).catch(() => undefined)),
      );
      await subscriber.ping().catch(() => undefined);
    } else await delay(500);
  }

  /**
   * Every waiter re-reads, RESYNC_BATCH at a time, one batch every RESYNC_GAP_MS: a node
   * holding 19,000 waiters would otherwise send 19,000 reads in one turn of its event loop,
   * pausing every other request while it builds them and Redis while it answers them. A
   * waiter that ended before its turn is skipped.
   */
  private resyncAll(): void {
    const due: [Subscription, Listener][] = [];
    for (const subscription of this.subscriptions.values())
      for (const listener of subscription.listeners) due.push([subscription, listener]);
    const batch = (from: number) => {
      if (this.closed) return;
      for (const [subscription, listener] of due.slice(from, from + RESYNC_BATCH))
        if (subscription.listeners.has(listener)) listener("resync");
      if (from + RESYNC_BATCH < due.length) setTimeout(batch, RESYNC_GAP_MS, from + RESYNC_BATCH).unref();
    };
    batch(0);
  }
}
