// The rules the endpoint table declares per operation and no type checks, held to every entry
// of the table over HTTP, on the in-process store and on Redis: a new entry that declares a
// rule is tested by it here without a line of its own, and fails until the relay keeps it.
//
// - `activity`: the call moves its room's idle expiry (docs/protocol.md §5.4), even refused;
// - `carriesText.in`: the text for the peer is refused when it holds the caller's own seat
//   token (§6.1), is refused unless an envelope in an encrypted room (§17), and counts in the
//   in-process store's byte budget (§8).
import { ERRORS, type EndpointSpec, type OperationId, peerTextField } from "@duet/protocol";
import { hashSeatToken } from "../../src/store/credentials";
import { type SampleRoom, TABLE, sampleCall, sampleEnvelope, sampleRoom, takesCode } from "../support/sample-calls";
import { type RelayTarget, forEachTarget, useTarget } from "../support/targets";

const IDLE_SECONDS = 60;
const id = (spec: EndpointSpec) => spec.operationId as OperationId;
const carriesTextIn = TABLE.filter((spec) => peerTextField(spec) !== undefined);

/** Milliseconds until the room ends, read from the store without counting as activity. */
async function expiresInMs(target: RelayTarget, room: SampleRoom): Promise<number | "ended"> {
  const store = target.nodes[0]!.store;
  return store.getStatus({ code: room.code, tokenHash: hashSeatToken(room.a) }, false).then(
    (status) => status.expiresInMs,
    () => "ended" as const,
  );
}

forEachTarget(
  (target) => {
    it("every call the table marks as activity moves its room's idle expiry, and no other call does", async () => {
      const { client } = target();
      // Each call on a room of its own, all at once: the idle clock runs 1.2 s first, so that
      // a call that moves the expiry puts it back to the whole lifetime, 1.2 s further away.
      const moved = await Promise.all(
        TABLE.filter((spec) => spec.room).map(async (spec) => {
          if (!takesCode(spec)) {
            // A call that makes its room (open): the room starts with the whole idle lifetime.
            const reply = await sampleCall(client, id(spec), { code: "", a: "", b: "", pendingId: "" });
            const left = await expiresInMs(target(), { ...reply.body, a: reply.body.token, b: "", pendingId: "" });
            return [spec.operationId, left !== "ended" && left > (IDLE_SECONDS - 5) * 1000] as const;
          }
          const room = await sampleRoom(client, spec);
          await new Promise((resolve) => setTimeout(resolve, 1200));
          const before = await expiresInMs(target(), room);
          const calledAt = Date.now();
          const reply = await sampleCall(client, id(spec), room);
          // Refusals by their room's rules (409, 429) are activity too; a call that never
          // reached the room (400, 401, 404) would measure nothing.
          const reached = [400, 401, 404].includes(reply.status) ? reply.text : "reached the room";
          expect({ op: spec.operationId, reached }).toEqual({ op: spec.operationId, reached: "reached the room" });
          const after = await expiresInMs(target(), room);
          const sinceCall = Date.now() - calledAt;
          if (before === "ended" || after === "ended") return [spec.operationId, "room ended"] as const;
          // Moved: the whole idle lifetime again at the call, less what passed since. Not moved:
          // at most what was left before, which was already 1.2 s short of it. The two stay
          // 1.2 s apart however long the calls take on a busy machine.
          return [spec.operationId, after > IDLE_SECONDS * 1000 - sinceCall - 600] as const;
        }),
      );
      expect(Object.fromEntries(moved)).toEqual(
        Object.fromEntries(TABLE.filter((spec) => spec.room).map((spec) => [spec.operationId, spec.activity])),
      );
    });

    it.each(carriesTextIn.map((spec) => [spec.operationId, spec]))(
      "%s refuses a text that holds the caller's own seat token (400, the token not echoed)",
      async (_op, spec) => {
        const { client } = target();
        const room = await sampleRoom(client, spec);
        const reply = await sampleCall(client, id(spec), room, { text: `here it is: ${room.b} (oops)` });
        expect({ status: reply.status, error: reply.body.error }).toEqual({ status: 400, error: "bad_request" });
        expect(reply.body.message).toContain("own seat token");
        expect(reply.text).not.toContain(room.b);
        // Someone else's token is only text.
        expect((await sampleCall(client, id(spec), room, { text: `a token: ${room.a}` })).status).toBe(200);
      },
    );

    it.each(carriesTextIn.map((spec) => [spec.operationId, spec]))(
      "%s takes only an envelope in an end-to-end encrypted room (400 e2e_required), and any text in a plain one",
      async (_op, spec) => {
        const { client } = target();
        const sealed = await sampleRoom(client, spec, true);
        const plain = await sampleCall(client, id(spec), sealed, { text: "not sealed" });
        expect({ status: plain.status, error: plain.body.error }).toEqual({
          status: ERRORS.e2e_required.status,
          error: "e2e_required",
        });
        expect((await sampleCall(client, id(spec), sealed, { text: sampleEnvelope() })).status).toBe(200);
        expect((await sampleCall(client, id(spec), await sampleRoom(client, spec), { text: "plain" })).status).toBe(
          200,
        );
      },
    );
  },
  { kinds: ["memory", "redis"], env: { ROOM_IDLE_SECONDS: String(IDLE_SECONDS), ROOM_MAX_SECONDS: "600" } },
);

describe("the in-process store's byte budget (MEMORY_STORE_MAX_BYTES) counts every text for the peer", () => {
  const target = useTarget("memory", { MEMORY_STORE_MAX_BYTES: String(1024 * 1024), LOG_LEVEL: "silent" });

  it("once the store is full to the byte, each such call is 507 insufficient_storage with Retry-After", async () => {
    const { client } = target();
    // The rooms the calls are made in, before the store fills; then rooms to fill it with.
    const rooms = await Promise.all(carriesTextIn.map((spec) => sampleRoom(client, spec)));
    const fillers = await Promise.all(Array.from({ length: 6 }, () => client.pairedRoom()));
    // Texts of halving sizes until not even one byte fits (a message without a key costs its text).
    for (let size = 1 << 19, filler = 0; size >= 1; ) {
      const room = fillers[filler]!;
      const reply = await client.send(room.code, room.a, "x".repeat(size));
      if (reply.body.error === "mailbox_full") filler++;
      else if (reply.status === 507) size >>= 1;
      else expect(reply.status).toBe(200);
      expect(filler).toBeLessThan(fillers.length);
    }
    const refused = await Promise.all(
      carriesTextIn.map(async (spec, i) => {
        const reply = await sampleCall(client, id(spec), rooms[i]!);
        return [spec.operationId, reply.body.error, Number(reply.headers.get("retry-after")) > 0] as const;
      }),
    );
    expect(refused).toEqual(carriesTextIn.map((spec) => [spec.operationId, "insufficient_storage", true]));
  });
});
