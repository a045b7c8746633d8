// The retry rule for 429 rate_limited against the real relay with a tiny rate limit: the
// SDK waits Retry-After and resends with the same idempotency key, so each logical send
// is delivered once and a manual resend with that key gives the same id.
import { DuetClient } from "../../src";
import { startRelay, type RelayProcess } from "../support/processes";

interface SendRecord {
  key: string;
  text: string;
  status: number;
  id?: string;
}

// 4 requests per 2 s and a burst of open, join and 8 concurrent sends: however the burst
// falls across a window boundary, some send is refused (2 + k <= 4 and 8 - k <= 4 cannot
// both hold), so the test never passes without exercising the retry.
describe("send under a per-IP rate limit of 4 requests per 2 s", () => {
  let relay: RelayProcess;
  beforeAll(async () => {
    relay = await startRelay({ RATE_LIMIT_REQUESTS: "4", RATE_LIMIT_WINDOW_SECONDS: "2" });
  });
  afterAll(async () => relay.stop());

  it("retries 429 rate_limited after Retry-After with the same key and gets the same id", async () => {
    const sends: SendRecord[] = [];
    const recordingFetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init);
      if (String(input).endsWith("/v1/send")) {
        const body = JSON.parse(String(init!.body)) as { idempotency_key: string; text: string };
        const answer = (await response.clone().json()) as { id?: string };
        sends.push({ key: body.idempotency_key, text: body.text, status: response.status, id: answer.id });
      }
      return response;
    }) as typeof fetch;
    const client = new DuetClient({ baseUrl: relay.url, fetch: recordingFetch, retryTimeoutMs: 20_000 });

    const opened = await client.open();
    const joined = await client.join(opened.code);
    const a = { code: opened.code, token: opened.token };
    const b = { code: joined.code, token: joined.token };
    const texts = ["one", "two", "three", "four", "five", "six", "seven", "eight"];
    const results = await Promise.all(texts.map((text) => client.send(a, text, { timeoutMs: 20_000 })));

    const refused = sends.filter((s) => s.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const refusal of refused) {
      // Every refused attempt was retried with its key and text unchanged, and that retry succeeded.
      const success = sends.find((s) => s.key === refusal.key && s.status === 200);
      expect(success).toBeDefined();
      expect(success!.text).toBe(refusal.text);
      expect(results[texts.indexOf(refusal.text)]!.id).toBe(success!.id);
    }
    // One key per logical send.
    expect(new Set(sends.map((s) => s.key)).size).toBe(texts.length);

    const { messages } = await client.recv(b, { waitMs: 0 });
    expect(messages.map((m) => m.text).sort()).toEqual([...texts].sort());
    await client.ack(
      b,
      messages.map((m) => m.id),
    );

    // Resending with a retried key returns the same id and stores nothing new, even after the ack.
    const retriedKey = refused[0]!.key;
    const original = sends.find((s) => s.key === retriedKey && s.status === 200)!;
    const resent = await client.send(a, original.text, { idempotencyKey: retriedKey, timeoutMs: 20_000 });
    expect(resent.id).toBe(original.id);
    expect((await client.recv(b, { waitMs: 0 })).messages).toEqual([]);
    await client.close(a, { force: true });
  });
});
