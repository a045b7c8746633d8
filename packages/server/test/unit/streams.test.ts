// The stream's opening race, made deterministic: a send lands in the exact instant between
// the stream's first read and its listening (the bus publishes it to nobody), and the
// stream still delivers it, because it reads again once it listens. Both paths: wake-ups
// for the room not yet reaching the node (read, listen, read) and already reaching it
// (listen, read).
import type { Message, StreamEndReason } from "@duet/protocol";
import { OpenStreams, STREAM_BACKLOG_BYTES } from "../../src/realtime/streams";
import { TimerWheel } from "../../src/realtime/timer-wheel";
import { hashSeatToken } from "../../src/store/credentials";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

const lifetimes = { idleMs: 60_000, maxMs: 60_000 };

describe.each([false, true])(
  "a send between the first read and the listening (room already listened to: %s)",
  (alreadyListening) => {
    it("is delivered by the stream", async () => {
      const store = new MemoryRoomStore(lifetimes);
      const a = await store.openRoom();
      const b = await store.joinRoom(a.code);
      const bus = store.wakeups;
      const realWatch = bus.watch.bind(bus);
      let sentInTheGap: string | undefined;
      // The send runs inside watch, before the listener is attached: its wake-up reaches no one.
      bus.watch = async (code, listener) => {
        if (!sentInTheGap)
          sentInTheGap = (
            await store.sendMessage({ code, tokenHash: hashSeatToken(a.token), text: "in the gap", envelope: false })
          ).id;
        return realWatch(code, listener);
      };
      bus.isListening = () => alreadyListening;
      const streams = new OpenStreams(store, 3_600_000, new TimerWheel());
      const prepared = await streams.open({ code: b.code, tokenHash: hashSeatToken(b.token) });
      const delivered: Message[] = [];
      const abort = new AbortController();
      const sink = {
        message: (m: Message) => {
          delivered.push(m);
          abort.abort();
        },
        read: () => undefined,
        heartbeat: () => undefined,
        end: (_reason: StreamEndReason) => undefined,
      };
      const serving = streams.serve(prepared, 0, sink, abort.signal);
      // Were it missed, nothing would ever wake this stream (no re-read for an hour).
      const timer = setTimeout(() => abort.abort(), 2000);
      await serving;
      clearTimeout(timer);
      expect(delivered).toEqual([{ id: sentInTheGap, from: "a", text: "in the gap" }]);
      expect(streams.size).toBe(0);
      await store.close();
    });
  },
);

// A client that stops reading: the stream writes nothing more past STREAM_BACKLOG_BYTES of
// untaken output, so the node does not keep every later message (each up to 12.6 MB of JSON)
// for as long as the connection stays open. After the drain, the rest goes out.
describe("a stream whose client does not take what was written", () => {
  it("holds messages and read receipts until the drain, then writes them", async () => {
    const store = new MemoryRoomStore(lifetimes);
    const a = await store.openRoom();
    const b = await store.joinRoom(a.code);
    const seatA = { code: a.code, tokenHash: hashSeatToken(a.token) };
    const seatB = { code: b.code, tokenHash: hashSeatToken(b.token) };
    const ids: string[] = [];
    for (const text of ["one", "two", "three"])
      ids.push((await store.sendMessage({ ...seatA, text, envelope: false })).id);
    const mine = (await store.sendMessage({ ...seatB, text: "from b", envelope: false })).id;
    const streams = new OpenStreams(store, 3_600_000, new TimerWheel());
    const prepared = await streams.open(seatB);
    const written: string[] = [];
    let backlog = 0;
    let wrote: () => void = () => undefined;
    const sink = {
      message: (m: Message) => {
        written.push(m.text);
        // Each message fills the connection: the client takes nothing.
        backlog += STREAM_BACKLOG_BYTES + 1;
        wrote();
      },
      read: (readIds: string[]) => void written.push(`read ${readIds.join(",")}`),
      heartbeat: () => undefined,
      end: (_reason: StreamEndReason) => undefined,
      backlog: () => backlog,
    };
    const abort = new AbortController();
    const nextWrite = () => new Promise<void>((resolve) => (wrote = resolve));
    const first = nextWrite();
    const serving = streams.serve(prepared, 0, sink, abort.signal);
    await first;
    // More output would only pile up: the next message waits, and so does the peer's receipt.
    await store.ackMessages(seatA, [mine]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).toEqual(["one"]);
    // The client took it all: the receipt goes out, then the next message (then it is full again).
    backlog = 0;
    const second = nextWrite();
    prepared.waiter.drained();
    await second;
    expect(written).toEqual(["one", `read ${mine}`, "two"]);
    backlog = 0;
    const third = nextWrite();
    prepared.waiter.drained();
    await third;
    expect(written).toEqual(["one", `read ${mine}`, "two", "three"]);
    abort.abort();
    await serving;
    expect(streams.size).toBe(0);
    await store.close();
  });
});
