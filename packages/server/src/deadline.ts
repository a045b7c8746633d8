// Bounded waits: the work's outcome, or the fallback's once the time is up. Every bound in
// the relay (a store call, a rate-limit count, a subscription's confirmation, the shutdown
// drain) goes through here, so each is one promise and one timer that is always cleared.

export interface WithinOptions {
  /** The timer does not keep the process alive (a shutdown's bound). */
  unref?: boolean;
  /** Applied to the work's rejection (the timeout's fallback is not mapped). */
  mapError?: (error: unknown) => unknown;
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
    const timer = setTimeout(() => {
      try {
        resolve(fallback());
      } catch (error) {
        reject(error);
      }
    }, ms);
    if (options.unref) timer.unref();
    running.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        fail(error);
      },
    );
  });
}
