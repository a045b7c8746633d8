// The SDK against the real relay process, once on the in-process store and once on a
// redis-server of our own: every call, the flows, and cancellation.
import { MAX_PENDING_MESSAGES, type Message } from "@duet/protocol";
import { DuetAbortError, DuetClient, DuetError, type SeatCredentials } from "../../src";
import { startRedis, startRelay, type RelayProcess } from "../support/processes";

const targets: Array<[string, () => Promise<{ relay: RelayProcess; stop(): Promise<void> }>]> = [
  [
    "memory",
    async () => {
      const relay = await startRelay();
      return { relay, stop: () => relay.stop() };
    },
  ],
  [
    "redis",
    async () => {
      const redis = await startRedis();
      const relay = await startRelay({ REDIS_URL: redis.url });
      return {
        relay,
        stop: async () => {
          await relay.stop();
          await redis.stop();
        },
      };
    },
  ],
];

describe.each(targets)("SDK against the relay (%s store)", (storeKind, start) => {
  let stop: () => Promise<void>;
  let relay: RelayProcess;
  let client: DuetClient;

  beforeAll(async () => {
    ({ relay, stop } = await start());
    client = new DuetClient({ baseUrl: relay.url });
    // The relay says which store it runs on: make sure the Redis run really is on Redis.
    expect(relay.logs()).toContain(`"store":"${storeKind}"`);
  });
  afterAll(async () => stop());

  async function pairedRoom(): Promise<{ a: SeatCredentials; b: SeatCredentials; joinUrl: string }> {
    const opened = await client.open();
    const joined = await client.join(opened.code.toUpperCase().replace(/-/g, ""));
    return {
      a: { code: opened.code, token: opened.token },
      b: { code: joined.code, token: joined.token },
      joinUrl: opened.join_url,
    };
  }

  it("open, join, send, recv, ack, status, close and stats", async () => {
    const before = await client.stats();
    const opened = await client.open();
    expect(opened).toMatchObject({ seat: "a", code: expect.stringMatching(/^[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}$/) });
    expect(opened.join_url).toBe(`${relay.url}/join/${opened.code}`);
    expect(opened.share).toContain(opened.code);
    expect(opened.share).not.toContain(opened.token);
    const a = { code: opened.code, token: opened.token };

    expect(await client.status(a)).toMatchObject({
      seat: "a",
      members: ["a"],
      peer_joined: false,
      pending_in: 0,
      pending_out: 0,
    });
    const joined = await client.join(` ${opened.code.toUpperCase()} `);
    expect(joined).toMatchObject({ code: opened.code, seat: "b" });
    const b = { code: joined.code, token: joined.token };

    const sent = await client.send(a, "héllo ✓");
    expect(sent.id).toEqual(expect.any(String));
    expect(await client.status(a)).toMatchObject({
      members: ["a", "b"],
      peer_joined: true,
      pending_out: 1,
      pending_in: 0,
    });
    const received = await client.recv(b, { waitMs: 0 });
    expect(received.messages).toEqual([{ id: sent.id, from: "a", text: "héllo ✓" }]);
    // recv does not consume
    expect((await client.recv(b, { waitMs: 0 })).messages).toHaveLength(1);
    expect(await client.ack(b, [sent.id])).toEqual({ ok: true, acked: 1 });
    expect(await client.ack(b, [sent.id])).toEqual({ ok: true, acked: 0 });
    expect((await client.recv(b, { waitMs: 0 })).messages).toEqual([]);

    expect(await client.close(b)).toEqual({ ok: true });
    await expect(client.status(a)).rejects.toMatchObject({ code: "not_found", status: 404 });
    const after = await client.stats();
    expect(after.sessions).toBeGreaterThanOrEqual(before.sessions + 1);
    expect(after.messages).toBeGreaterThanOrEqual(before.messages + 1);
  });

  it("recv long-polls until a message arrives", async () => {
    const { a, b } = await pairedRoom();
    const started = Date.now();
    const waiting = client.recv(b, { waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 300));
    const { id } = await client.send(a, "wake up");
    const { messages } = await waiting;
    expect(messages.map((m) => m.id)).toEqual([id]);
    expect(Date.now() - started).toBeLessThan(5000);
    await client.close(a, { force: true });
  });

  it("answers typed errors: full, unread, not_found, unauthorized, bad_request", async () => {
    const { a, b } = await pairedRoom();
    await expect(client.join(a.code)).rejects.toMatchObject({ code: "full", status: 409 });
    await client.send(a, "unread");
    await expect(client.close(b)).rejects.toMatchObject({ code: "unread", status: 409 });
    await expect(client.status({ code: a.code, token: "not-the-token" })).rejects.toMatchObject({
      code: "unauthorized",
      status: 401,
    });
    await expect(client.join("zzzz-zzzz-zzzz")).rejects.toMatchObject({ code: "not_found", status: 404 });
    await expect(client.join("no")).rejects.toMatchObject({ code: "bad_request", status: 400 });
    const error = await client
      .send(a, "same key", { idempotencyKey: "key-1" })
      .then(() => client.send(a, "other text", { idempotencyKey: "key-1" }))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuetError);
    expect(error).toMatchObject({ code: "idempotency_conflict", status: 409 });
    expect(await client.close(b, { force: true })).toEqual({ ok: true });
  });

  it("send with the same idempotency key returns the same id", async () => {
    const { a, b } = await pairedRoom();
    const first = await client.send(a, "once", { idempotencyKey: "retry-me" });
    const again = await client.send(a, "once", { idempotencyKey: "retry-me" });
    expect(again.id).toBe(first.id);
    expect((await client.recv(b, { waitMs: 0 })).messages).toHaveLength(1);
    await client.close(a, { force: true });
  });

  it("waitForPeer resolves once the peer joins", async () => {
    const opened = await client.open();
    const a = { code: opened.code, token: opened.token };
    const waiting = client.waitForPeer(a, { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 250));
    await client.join(opened.code);
    await expect(waiting).resolves.toMatchObject({ peer_joined: true, members: ["a", "b"] });
    await client.close(a);
  });

  it("receiveLoop acks each message only after the callback succeeded", async () => {
    const { a, b } = await pairedRoom();
    await client.send(a, "one");
    await client.send(a, "two");
    const seen: string[] = [];
    const pendingDuringCallback: number[] = [];
    const result = await client.receiveLoop(
      b,
      async (message) => {
        // While the callback runs, its message is still pending at the relay.
        pendingDuringCallback.push((await client.status(b)).pending_in);
        seen.push(message.text);
      },
      { maxMessages: 2, waitMs: 1000 },
    );
    expect(result).toEqual({ handled: 2 });
    expect(seen).toEqual(["one", "two"]);
    expect(pendingDuringCallback).toEqual([2, 1]);
    expect(await client.status(b)).toMatchObject({ pending_in: 0 });
    await client.close(a);
  });

  it("receiveLoop on the push stream (transport: stream): pending and new messages, acked, then not_found when the room closes", async () => {
    const { a, b } = await pairedRoom();
    await client.send(a, "before");
    const seen: string[] = [];
    const loop = client.receiveLoop(
      b,
      async (message) => {
        seen.push(message.text);
        if (message.text === "before") await client.send(a, "after");
        if (message.text === "after") await client.close(a, { force: true });
      },
      { transport: "stream" },
    );
    await expect(loop).rejects.toMatchObject({ code: "not_found" });
    expect(seen).toEqual(["before", "after"]);
  });

  it("client.stream: an open event, then each message as it is sent", async () => {
    const { a, b } = await pairedRoom();
    const events: unknown[] = [];
    const controller = new AbortController();
    const reading = (async () => {
      for await (const event of client.stream(b, { signal: controller.signal })) {
        events.push(event);
        if (event.event === "open") await client.send(a, "pushed");
        if (event.event === "message") break;
      }
    })();
    await reading;
    expect(events).toEqual([
      { event: "open" },
      { event: "message", message: { id: expect.any(String), from: "a", text: "pushed" } },
    ]);
    await client.close(a, { force: true });
  });

  it("a throwing callback stops the loop and leaves its message pending", async () => {
    const { a, b } = await pairedRoom();
    await client.send(a, "first");
    await client.send(a, "poison");
    const seen: string[] = [];
    await expect(
      client.receiveLoop(b, (message: Message) => {
        if (message.text === "poison") throw new Error("cannot handle this one");
        seen.push(message.text);
      }),
    ).rejects.toThrow("cannot handle this one");
    expect(seen).toEqual(["first"]);
    const { messages } = await client.recv(b, { waitMs: 0 });
    expect(messages.map((m) => m.text)).toEqual(["poison"]);
    await client.close(a, { force: true });
  });

  it("receiveLoop ends with not_found when the peer closes the room", async () => {
    const { a, b } = await pairedRoom();
    const loop = client.receiveLoop(b, () => undefined, { waitMs: 10_000 });
    // Handled from the start: on the push stream the loop can end before close's own answer arrives.
    const ended = expect(loop).rejects.toMatchObject({ code: "not_found", ended: { reason: "closed", by: "a" } });
    await new Promise((r) => setTimeout(r, 300));
    await client.close(a);
    await ended;
  });

  it("an AbortSignal cancels a long-polling recv, the receive loop and waitForPeer promptly", async () => {
    const { a, b } = await pairedRoom();
    const controller = new AbortController();
    const started = Date.now();
    const recv = client.recv(b, { waitMs: 20_000, signal: controller.signal });
    const loop = client.receiveLoop(a, () => undefined, { waitMs: 20_000, signal: controller.signal });
    const opened = await client.open();
    const waitForPeer = client.waitForPeer({ code: opened.code, token: opened.token }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 300);
    await expect(recv).rejects.toBeInstanceOf(DuetAbortError);
    await expect(loop).resolves.toEqual({ handled: 0 });
    await expect(waitForPeer).rejects.toBeInstanceOf(DuetAbortError);
    expect(Date.now() - started).toBeLessThan(3000);
    await client.close(a);
  });

  it("send waits on 429 mailbox_full until the peer acks, then delivers", async () => {
    const { a, b } = await pairedRoom();
    for (let i = 0; i < MAX_PENDING_MESSAGES; i++) await client.send(a, `m${i}`);
    let refused!: () => void;
    const waitingForSpace = new Promise<void>((resolve) => (refused = resolve));
    const ninth = client.send(a, "ninth", {
      onWait: (event) => event.reason === "mailbox_full" && refused(),
      timeoutMs: 15_000,
    });
    // The peer acks only once the send was refused and is waiting for space.
    await waitingForSpace;
    const { messages } = await client.recv(b, { waitMs: 0 });
    expect(messages).toHaveLength(MAX_PENDING_MESSAGES);
    await client.ack(b, [messages[0]!.id]);
    const { id } = await ninth;
    const after = await client.recv(b, { waitMs: 0 });
    expect(after.messages.at(-1)).toEqual({ id, from: "a", text: "ninth" });
    await client.close(a, { force: true });
  });

  it("send gives up on a full mailbox when its time budget runs out", async () => {
    const { a } = await pairedRoom();
    for (let i = 0; i < MAX_PENDING_MESSAGES; i++) await client.send(a, `m${i}`);
    // The budget is long enough for the first answer on a busy machine: the verdict is that the
    // send ends with the mailbox's refusal, not a timeout of its own (a send retrying for ever
    // fails by the test's timeout).
    await expect(client.send(a, "too many", { timeoutMs: 5000 })).rejects.toMatchObject({
      code: "mailbox_full",
      status: 429,
    });
    await client.close(a, { force: true });
  });
});
