// A client that does what a careful duet client behind several nodes does: when a call
// fails at the connection level (refused, reset, closed), it retries the same call on the
// node after the one that failed (never the same node twice in a row: with calls of other
// seats moving a shared turn, eight retries could all land on the node being restarted). Only safe because every call is: recv/status are reads, ack is idempotent,
// and sends carry idempotency keys. HTTP answers, errors included, are returned as they are.
import { TestClient, type CallOptions, type Reply } from "./http-client";

export class FailoverClient extends TestClient {
  /** Calls that needed at least one retry on another node. */
  failovers = 0;

  constructor(
    baseUrls: string[],
    private readonly attempts = 8,
  ) {
    super(baseUrls);
  }

  override async call<T = any>(method: string, path: string, options: CallOptions = {}): Promise<Reply<T>> {
    let lastError: unknown;
    const first = options.node ?? this.nextTurn();
    for (let attempt = 0; attempt < this.attempts; attempt++) {
      try {
        const reply = await super.call<T>(method, path, { ...options, node: first + attempt });
        if (attempt > 0) this.failovers++;
        return reply;
      } catch (error) {
        // Our own deadline is not a connection failure: give up.
        if (options.signal?.aborted) throw error;
        lastError = error;
        await new Promise((resolve) => setTimeout(resolve, 25 * (attempt + 1)));
      }
    }
    throw lastError;
  }
}
