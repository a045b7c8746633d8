// Tokens: returned once, to the caller that minted them, and nowhere else: not in another
// response, not in a log line, not in the tally, not in Redis in clear.
import { Redis } from "ioredis";
import { forEachTarget, pairedRoomOn } from "../support/targets";

forEachTarget((target) => {
  it("no token appears in any response but the one that minted it, nor in any log line", async () => {
    const { client, room } = await pairedRoomOn(target);
    const responses: string[] = [];
    const record = async <T extends { text: string }>(reply: Promise<T>) => {
      const answer = await reply;
      responses.push(answer.text);
      return answer;
    };
    const sent = await record(client.send(room.code, room.a, "hello", "k"));
    await record(client.recv(room.code, room.b, 0));
    await record(client.status(room.code, room.a));
    await record(client.status(room.code, room.b));
    await record(client.join(room.code));
    await record(client.status(room.code, "wrong-token"));
    await record(client.stats());
    await record(client.call("GET", "/v1/api"));
    await record(client.call("GET", "/v1/openapi.json"));
    await record(client.call("GET", `/join/${room.code}`));
    expect((await record(client.ack(room.code, room.b, [sent.body.id]))).body).toEqual({ ok: true, acked: 1 });
    expect((await record(client.close(room.code, room.a))).status).toBe(200);
    await record(client.status(room.code, room.a));
    await new Promise((r) => setTimeout(r, 100)); // let the last log lines land
    for (const token of [room.a, room.b]) {
      for (const text of responses) expect(text).not.toContain(token);
      expect(target().logs()).not.toContain(token);
    }
    expect(target().logs()).not.toContain("hello");
  });

  it("send refuses a text that contains the caller's own token (400, nothing stored, the token not echoed), as the MCP tool does", async () => {
    const { client, room } = await pairedRoomOn(target);
    const leak = await client.send(room.code, room.a, `my token is ${room.a}, keep it safe`, "leak");
    expect(leak.status).toBe(400);
    expect(leak.body).toEqual({ error: "bad_request", message: expect.stringContaining("own seat token") });
    expect(leak.text).not.toContain(room.a);
    expect((await client.recv(room.code, room.b, 0)).body.messages).toEqual([]);
    // The peer's token is not the caller's: that text is the caller's business.
    expect((await client.send(room.code, room.a, `not mine: ${room.b}`)).status).toBe(200);
  });
});

forEachTarget(
  (target) => {
    it("Redis holds only hashes of tokens, never a token in clear", async () => {
      const { client, config } = target();
      const room = await client.pairedRoom();
      await client.send(room.code, room.a, "x");
      const redis = new Redis(process.env.REDIS_URL!);
      try {
        const keys = await redis.keys(`${config.redis!.keyPrefix}*`);
        expect(keys.length).toBeGreaterThan(0);
        let dump = "";
        for (const key of keys) {
          const type = await redis.type(key);
          if (type === "hash") dump += JSON.stringify(await redis.hgetall(key));
          if (type === "list") dump += JSON.stringify(await redis.lrange(key, 0, -1));
          dump += key;
        }
        expect(dump).not.toContain(room.a);
        expect(dump).not.toContain(room.b);
      } finally {
        redis.disconnect();
      }
    });
  },
  { kinds: ["redis"] },
);
