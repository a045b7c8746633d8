// The waiting recvs of one seat woken by one send share one re-read, and so one answer
// (realtime/long-polls.ts): a 2 MiB text is 12.6 MB of JSON per answer. A waiter joins only a
// read begun after it was woken, so a read under way when a second send lands never hides it.
import { WaitingRecvs } from "../../src/realtime/long-polls";
import { TimerWheel } from "../../src/realtime/timer-wheel";
import { hashSeatToken } from "../../src/store/credentials";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";
import type { InboxSnapshot } from "../../src/store/room-store";

const lifetimes = { idleMs: 60_000, maxMs: 60_000 };
const NEVER = { aborted: false, addEventListener: () => undefined, removeEventListener: () => undefined };

async function setUp() {
  const store = new MemoryRoomStore(lifetimes);
  const a = await store.openRoom();
  const b = await store.joinRoom(a.code);
  const rereads: Promise<InboxSnapshot>[] = [];
  const read = store.readInbox.bind(store);
  store.readInbox = (seat, touch) => {
    const answer = read(seat, touch);
    if (!touch) rereads.push(answer);
    return answer;
  };
  const recvs = new WaitingRecvs(store, new TimerWheel());
  const seat = { code: b.code, tokenHash: hashSeatToken(b.token) };
  const send = (text: string) =>
    store.sendMessage({ code: a.code, tokenHash: hashSeatToken(a.token), text, envelope: false });
  const wait = () => recvs.waitForMessages(seat, { waitMs: 25_000, recheckMs: 3_600_000, signal: NEVER });
  const until = async (count: number) => {
    while (recvs.size !== count) await new Promise((r) => setImmediate(r));
  };
  return { rereads, send, wait, until };
}

it("four waiting recvs of a seat woken by one send share one re-read and one snapshot", async () => {
  const { rereads, send, wait, until } = await setUp();
  const waits = Array.from({ length: 4 }, wait);
  await until(4);
  await send("one large text");
  const answers = await Promise.all(waits);
  expect(rereads).toHaveLength(1);
  expect(new Set(answers).size).toBe(1);
  expect(answers[0]!.messages.map((m) => m.text)).toEqual(["one large text"]);
});

it("a recv woken while another's re-read is under way does not join it: it reads again and sees its send", async () => {
  const store = new MemoryRoomStore(lifetimes);
  const a = await store.openRoom();
  const b = await store.joinRoom(a.code);
  // Re-reads (touch false) read at once but answer only when let go; first reads answer as usual.
  let gate: (() => void) | undefined;
  const held = new Promise<void>((r) => (gate = r));
  let rereads = 0;
  let firstReads = 0;
  const read = store.readInbox.bind(store);
  store.readInbox = async (seat, touch) => {
    const answer = await read(seat, touch);
    if (touch) firstReads++;
    else if (++rereads === 1) await held;
    return answer;
  };
  const recvs = new WaitingRecvs(store, new TimerWheel());
  const seat = { code: b.code, tokenHash: hashSeatToken(b.token) };
  const wait = (waitMs: number) => recvs.waitForMessages(seat, { waitMs, recheckMs: 3_600_000, signal: NEVER });
  const tick = () => new Promise((r) => setImmediate(r));

  const first = wait(25_000);
  while (firstReads < 1) await tick();
  // A wake-up with nothing in the inbox (the node's reconnect): the first recv's re-read begins, held.
  (store.wakeups as unknown as { publish(code: string, event: string): void }).publish(a.code, "resync");
  while (rereads < 1) await tick();
  // A second recv reads, finds nothing and waits; then a send wakes it while that re-read is held.
  const second = wait(5_000);
  while (firstReads < 2) await tick();
  for (let i = 0; i < 5; i++) await tick();
  await store.sendMessage({ code: a.code, tokenHash: hashSeatToken(a.token), text: "after", envelope: false });
  for (let i = 0; i < 5; i++) await tick();
  gate!();
  // Joining the held read (begun before the send) would answer [] when its 5 s run out.
  expect((await second)!.messages.map((m) => m.text)).toEqual(["after"]);
  expect((await first)!.messages.map((m) => m.text)).toEqual(["after"]);
});
