// The tally behind GET /v1/stats and /metrics, read from the store at most once per
// interval per node. On Redis a read is two commands per hash tag (2,048): a public
// endpoint must not turn each request into that, whatever the request rate.
import type { RoomStore, StoreTally } from "./room-store.js";

export class CachedTally {
  private latest?: { tally: StoreTally; at: number };
  private inFlight?: Promise<StoreTally>;

  constructor(
    private readonly store: RoomStore,
    private readonly maxAgeMs: number,
  ) {}

  async read(): Promise<StoreTally> {
    if (this.latest && Date.now() - this.latest.at < this.maxAgeMs) return this.latest.tally;
    // Concurrent callers share one read.
    this.inFlight ??= this.store.getStats().then(
      (tally) => {
        this.latest = { tally, at: Date.now() };
        this.inFlight = undefined;
        return tally;
      },
      (error: unknown) => {
        this.inFlight = undefined;
        throw error;
      },
    );
    return this.inFlight;
  }
}
