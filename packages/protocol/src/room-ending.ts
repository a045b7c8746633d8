// How a room ended, as one sentence: the server puts it in the 404's message and the
// client prints it, so both say the same thing.
import type { Seat } from "./message.js";
import type { RoomEnding } from "./schemas.js";

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * "The room ended: your peer (seat b) closed it at 2026-… with every message read."
 * With `seat` (the reader's own seat) the closer is named "you" or "your peer".
 */
export function describeRoomEnding(ending: RoomEnding, seat?: Seat): string {
  const who =
    ending.by === undefined
      ? "a seat"
      : seat === undefined
        ? `seat ${ending.by}`
        : ending.by === seat
          ? `you (seat ${ending.by})`
          : `your peer (seat ${ending.by})`;
  switch (ending.reason) {
    case "closed":
      return `The room ended: ${who} closed it at ${ending.at} with every message read.`;
    case "force_closed": {
      const left = ending.abandoned;
      const detail = left
        ? `: ${plural(left.in, "message", "messages")} to you that you had not acked, ${plural(left.out, "message", "messages")} from you that the peer had not acked`
        : "";
      return `The room ended: ${who} closed it with force at ${ending.at}, abandoning unread messages${detail}.`;
    }
    case "idle_timeout":
      return `The room ended: it expired at ${ending.at}, idle (no call from either seat for its idle lifetime).`;
    case "hard_cap":
      return `The room ended: it expired at ${ending.at}, at the end of its lifetime from open (the hard cap).`;
  }
}
