// The stream's opening race, made deterministic: a send lands in the exact instant between
// the stream's first read and its listening (the bus publishes it to nobody), and the
// stream still delivers it, because it reads again once it listens. Both paths: wake-ups
// for the room not yet reaching the node (read, listen, read) and already reaching it
// (listen, read).
import type { Message, StreamEndReason } from "@duet/protocol";
import { OpenStreams } from "../../src/realtime/streams";
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
