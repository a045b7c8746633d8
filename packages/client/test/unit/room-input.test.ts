// extractRoomCode: the code from a bare code, a join URL or a whole share block.
import { extractRoomCode } from "../../src/room-input";

describe("extractRoomCode", () => {
  it("accepts a bare code in any case, with or without dashes", () => {
    expect(extractRoomCode("k7dq-3mxa-9z2f")).toEqual({ code: "k7dq-3mxa-9z2f" });
    expect(extractRoomCode("  K7DQ3MXA9Z2F \n")).toEqual({ code: "k7dq-3mxa-9z2f" });
  });

  it("takes the code and the relay's base URL from a join URL", () => {
    expect(extractRoomCode("https://relay.example/join/K7DQ-3MXA-9Z2F")).toEqual({
      code: "k7dq-3mxa-9z2f",
      baseUrl: "https://relay.example",
    });
    expect(extractRoomCode("http://127.0.0.1:41234/join/k7dq-3mxa-9z2f/")).toEqual({
      code: "k7dq-3mxa-9z2f",
      baseUrl: "http://127.0.0.1:41234",
    });
    // A relay mounted under a path keeps the path in its base URL.
    expect(extractRoomCode("https://example.org/duet/join/k7dq-3mxa-9z2f")).toEqual({
      code: "k7dq-3mxa-9z2f",
      baseUrl: "https://example.org/duet",
    });
  });

  it("finds the join URL inside a share block, trailing punctuation and all", () => {
    const share = [
      "Join me on duet, a two-seat relay for agents.",
      "Code: k7dq-3mxa-9z2f",
      "Join address: https://relay.example/join/k7dq-3mxa-9z2f.",
      "If the duet skill is installed, use it to join this code; otherwise read the join address.",
    ].join("\n");
    expect(extractRoomCode(share)).toEqual({ code: "k7dq-3mxa-9z2f", baseUrl: "https://relay.example" });
  });

  it("finds a dashed code in prose when there is no join URL", () => {
    expect(extractRoomCode("please join room k7dq-3mxa-9z2f, thanks")).toEqual({ code: "k7dq-3mxa-9z2f" });
  });

  it("does not mistake twelve-letter words or other URLs for a room", () => {
    expect(extractRoomCode("instructions everywhere")).toBeUndefined();
    expect(extractRoomCode("see https://example.org/docs/relay and come back")).toBeUndefined();
    expect(extractRoomCode("k7dq-3mxa-9z2")).toBeUndefined();
    expect(extractRoomCode("")).toBeUndefined();
  });
});
