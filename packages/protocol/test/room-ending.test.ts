// The one sentence that says how a room ended: the relay's 404 message and the CLI use it.
import { describeRoomEnding } from "../src/room-ending";

const at = "2026-11-26T06:00:00.000Z";

describe("describeRoomEnding", () => {
  it("names the closer from the reader's seat", () => {
    expect(describeRoomEnding({ reason: "closed", by: "a", at }, "a")).toBe(
      `The room ended: you (seat a) closed it at ${at} with every message read.`,
    );
    expect(describeRoomEnding({ reason: "closed", by: "a", at }, "b")).toBe(
      `The room ended: your peer (seat a) closed it at ${at} with every message read.`,
    );
    expect(describeRoomEnding({ reason: "closed", by: "b", at })).toBe(
      `The room ended: seat b closed it at ${at} with every message read.`,
    );
  });

  it("counts what a force close abandoned, in each direction", () => {
    expect(describeRoomEnding({ reason: "force_closed", by: "b", abandoned: { in: 1, out: 2 }, at }, "a")).toBe(
      `The room ended: your peer (seat b) closed it with force at ${at}, abandoning unread messages: ` +
        "1 message to you that you had not acked, 2 messages from you that the peer had not acked.",
    );
  });

  it("tells idle timeout from hard cap", () => {
    expect(describeRoomEnding({ reason: "idle_timeout", at })).toMatch(/expired at .*, idle/);
    expect(describeRoomEnding({ reason: "hard_cap", at })).toMatch(/expired at .*hard cap/);
  });
});
