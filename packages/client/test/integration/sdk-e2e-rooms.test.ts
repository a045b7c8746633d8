// The SDK in an end-to-end encrypted room, against the real relay process (in-process store):
// open({e2e}) makes the key and the share block, join takes it from the address, send seals
// (and a retry resends the same envelope), recv and receiveLoop open, refuse and report.
import { DuetClient, DuetE2eError, DuetError, type RejectedMessage, type SeatCredentials } from "../../src";
import { startRelay, type RelayProcess } from "../support/processes";

describe("SDK in an end-to-end encrypted room", () => {
  let relay: RelayProcess;
  let client: DuetClient;
  beforeAll(async () => {
    relay = await startRelay();
    client = new DuetClient({ baseUrl: relay.url });
  });
  afterAll(async () => relay.stop());

  async function pair(): Promise<{ a: SeatCredentials; b: SeatCredentials; key: string }> {
    const opened = await client.open({ e2e: true });
    expect(opened.e2e).toBe(true);
    expect(opened.join_url).toBe(`${relay.url}/join/${opened.code}#k=${opened.key}`);
    expect(opened.share).toContain(opened.join_url);
    expect(opened.share).not.toContain(opened.token);
    const joined = await client.join(opened.share);
    expect(joined).toMatchObject({ seat: "b", e2e: true });
    expect(joined.e2e_session).toBeDefined();
    return {
      a: { code: opened.code, token: opened.token, e2e: opened.e2e_session },
      b: { code: joined.code, token: joined.token, e2e: joined.e2e_session },
      key: opened.key!,
    };
  }

  it("seals on send and opens on recv; the relay holds only the envelope", async () => {
    const { a, b } = await pair();
    const { id } = await client.send(a, "secret plan");
    const raw = await client.recv({ code: b.code, token: b.token }, { waitMs: 0 });
    expect(raw.messages[0]!.text).toMatch(/^duet-e2e:v1:/);
    expect(raw.messages[0]!.text).not.toContain("secret plan");
    expect(await client.recv(b, { waitMs: 0 })).toEqual({
      messages: [{ id, from: "a", text: "secret plan", seq: 1 }],
      rejected: [],
    });
    // recv does not consume: the same message again is not a replay.
    expect((await client.recv(b, { waitMs: 0 })).messages).toEqual([{ id, from: "a", text: "secret plan", seq: 1 }]);
  });

  it("a retried send resends the same envelope under its idempotency key", async () => {
    const { a, b } = await pair();
    let calls = 0;
    const flaky = new DuetClient({
      baseUrl: relay.url,
      fetch: async (input, init) => {
        const answer = await fetch(input, init);
        // The first send lands but its answer is lost: the SDK retries.
        if (String(input).endsWith("/v1/send") && calls++ === 0) throw new TypeError("fetch failed");
        return answer;
      },
    });
    await flaky.send(a, "only once");
    expect(calls).toBe(2);
    expect((await client.recv(b, { waitMs: 0 })).messages.map((m) => m.text)).toEqual(["only once"]);
  });

  it("receiveLoop stops at a refused message, or reports and drops it with onRejected", async () => {
    const { a, b } = await pair();
    await client.send(b, "sent by b");
    // Reflect b's envelope back to b: a forwards what it received from b, unopened.
    const fromB = (await client.recv({ code: a.code, token: a.token }, { waitMs: 0 })).messages[0]!;
    await client.send({ code: a.code, token: a.token }, fromB.text);
    await client.send(a, "genuine");

    await expect(client.receiveLoop(b, () => undefined, { maxMessages: 1, waitMs: 0 })).rejects.toThrow(DuetE2eError);
    const refused: RejectedMessage[] = [];
    const texts: string[] = [];
    await client.receiveLoop(b, (message) => void texts.push(message.text), {
      maxMessages: 1,
      waitMs: 0,
      onRejected: (r) => refused.push(r),
    });
    expect(refused).toMatchObject([{ from: "a", reason: "reflected" }]);
    expect(texts).toEqual(["genuine"]);
    expect((await client.status(b)).pending_in).toBe(0);
  });

  it("refuses a text that cannot fit in an envelope before sending it", async () => {
    const { a } = await pair();
    const error = await client.send(a, "x".repeat(a.e2e!.maxTextBytes() + 1)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuetError);
    expect((error as DuetError).code).toBe("too_large");
    expect((error as DuetError).message).toContain(
      `at most ${a.e2e!.maxTextBytes()} fit in this end-to-end encrypted room`,
    );
  });
});
