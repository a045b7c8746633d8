// Bounded waits: the work's outcome, or the fallback's once the time is up. Every bound in
// the relay (a store call, a rate-limit count, a subscription's confirmation, the shutdown
// drain) goes through here, so each is one promise and one timer that is always cleared.

export interface WithinOptions {
  /** The timer does not keep the process alive (a shutdown's bound). */
  unref?: boolean;
  /** Applied to the work's rejection (the timeout's fallback is not mapped). */
  mapError?: (error: unknown) => unknown;
  /**
   * Asked when the time is up, with the time waited so far: a further wait (ms > 0) instead
   * of the fallback now. A store call on a slow link that is still answering waits on.
   */
  extend?: (waitedMs: number) => number;
}

/**
 * Settles as `work` does, or as `fallback()` (its value, or what it throws) after `ms`,
 * whichever comes first. The work is not cancelled: it may still settle later, unseen.
 * `work` may be a function, called at once; what it throws is treated as its rejection.
 */
export function within<T, F = T>(
  work: Promise<T> | (() => Promise<T>),
  ms: number,
  fallback: () => F,
  options: WithinOptions = {},
): Promise<T | F> {
  return new Promise<T | F>((resolve, reject) => {
    const fail = (error: unknown) => reject(options.mapError ? options.mapError(error) : error);
    let running: Promise<T>;
    try {
      running = typeof work === "function" ? work() : work;
    } catch (error) {
      return fail(error);
    }
    const started = options.extend ? performance.now() : 0;
    let settled = false;
    const decide = () => {
      if (settled) return;
      const more = options.extend?.(performance.now() - started) ?? 0;
      if (more > 0) return arm(more);
      settled = true;
      try {
        resolve(fallback());
      } catch (error) {
        reject(error);
      }
    };
    // Timers run before the event loop reads its sockets: after the loop was held past the
    // deadline, an answer may be waiting unread. setImmediate runs after that read.
    const expire = () => setImmediate(decide);
    let timer: NodeJS.Timeout;
    const arm = (after: number) => {
      timer = setTimeout(expire, after);
      if (options.unref) timer.unref();
    };
    arm(ms);
    running.then(
      (value) => {
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        settled = true;
        clearTimeout(timer);
        fail(error);
      },
    );
  });
}
