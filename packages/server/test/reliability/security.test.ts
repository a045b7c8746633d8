// Security checks under hostile use: a canary token never leaks (logs, /metrics,
// /v1/stats, error bodies, Redis); token comparison does not leak timing; no CORS for
// unknown origins; X-Forwarded-For only through a configured trusted proxy; headers and
// bodies at and beyond their limits; slow senders do not block others. The entropy of
// codes against the join rate limit is worked out in docs/security.md.
import { connect, type Socket } from "node:net";
import { Redis } from "ioredis";
import { ENDPOINTS, type EndpointSpec, MAX_BODY_BYTES, MAX_TEXT_BYTES, OPERATION_IDS } from "@duet/protocol";
import { hashSeatToken, mintSeatToken, tokenHashesEqual } from "../../src/store/credentials";
import { startTarget, useTarget } from "../support/targets";
import { median } from "../support/workload";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every value under a key prefix, as one string. */
async function dumpRedis(url: string, prefix: string): Promise<string> {
  const redis = new Redis(url);
  try {
    let dump = "";
    for (const key of await redis.keys(`${prefix}*`)) {
      dump += `${key}\n`;
      const type = await redis.type(key);
      if (type === "hash") dump += JSON.stringify(await redis.hgetall(key));
      else if (type === "list") dump += JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === "string") dump += await redis.get(key);
      else if (type === "set") dump += JSON.stringify(await redis.smembers(key));
      else if (type === "zset") dump += JSON.stringify(await redis.zrange(key, "0", "-1"));
      dump += "\n";
    }
    return dump;
  } finally {
    redis.disconnect();
  }
}

describe("a canary token", () => {
  const target = useTarget("redis", { LOG_LEVEL: "debug", RATE_LIMIT_REQUESTS: "1000", RATE_LIMIT_ROOMS: "100" });

  it("appears in no log line, /metrics, /v1/stats, error body or answer but its own, and Redis holds only its hash", async () => {
    const { client, config } = target();
    const room = await client.pairedRoom();
    const other = await client.pairedRoom();
    const canary = room.a;
    const answers: string[] = [];
    const keep = async (reply: Promise<{ status: number; text: string }>) => {
      const r = await reply;
      answers.push(`${r.status} ${r.text}`);
      return r;
    };
    // The canary as the right token, as a wrong token, in malformed headers, as a code, in a
    // query string, in an X-Forwarded-For, in a join body: wherever a careless log could catch it.
    await keep(client.send(room.code, canary, "hello", "k1"));
    await keep(client.recv(room.code, room.b, 0));
    await keep(client.status(room.code, canary));
    await keep(client.status(other.code, canary)); // 401
    await keep(client.status(`${room.code}x`, canary)); // 400/404
    await keep(client.call("GET", "/v1/status", { query: { code: canary }, token: canary }));
    await keep(
      client.call("GET", "/v1/status", {
        query: { code: room.code },
        headers: { authorization: `Bearer ${canary} extra` },
      }),
    );
    await keep(
      client.call("GET", "/v1/status", { query: { code: room.code }, headers: { authorization: `Basic ${canary}` } }),
    );
    await keep(client.call("GET", "/v1/recv", { query: { code: room.code, wait: canary }, token: canary }));
    await keep(client.call("POST", "/v1/send", { rawBody: `{"code":"${room.code}","text":`, token: canary }));
    await keep(client.call("POST", "/v1/join", { body: { code: canary } }));
    await keep(client.call("POST", `/v1/nope/${canary}`, { token: canary }));
    await keep(
      client.call("GET", "/v1/status", {
        query: { code: room.code },
        token: canary,
        headers: { "x-forwarded-for": canary },
      }),
    );
    await keep(client.call("GET", `/join/${canary}`));
    await keep(client.ack(room.code, canary, [canary]));
    await keep(client.call("POST", "/v1/close", { body: { code: room.code, force: canary }, token: canary }));
    await keep(client.stats());
    const metrics = await client.metrics();
    await sleep(100); // the last log lines land
    const logs = target().logs();
    expect(logs.length).toBeGreaterThan(1000);

    const where: Record<string, string> = {
      logs,
      metrics: metrics.status === 200 ? metrics.text : "",
      stats: answers.filter((a) => a.includes('"sessions"')).join("\n"),
      answers: answers.join("\n"),
      redis: await dumpRedis(process.env.REDIS_URL!, config.redis!.keyPrefix),
    };
    const hits = Object.fromEntries(Object.entries(where).map(([name, text]) => [name, text.split(canary).length - 1]));
    console.log(
      `FIGURES canary ${JSON.stringify({ hits, metricsStatus: metrics.status, logBytes: logs.length, redisBytes: where.redis!.length })}`,
    );
    expect(metrics.status).toBe(200);
    expect(hits).toEqual({ logs: 0, metrics: 0, stats: 0, answers: 0, redis: 0 });
    // What Redis does hold is the hash.
    expect(where.redis).toContain(hashSeatToken(canary));
    await client.close(room.code, canary, true);
  });
});

describe("token comparison", () => {
  it("structurally: the store compares SHA-256 digests, of equal length, with crypto.timingSafeEqual", () => {
    // A presented token is hashed before any comparison, so the bytes an attacker controls
    // are not the bytes compared: a shared prefix of tokens is no shared prefix of digests.
    const token = mintSeatToken();
    const digest = hashSeatToken(token);
    expect(digest).toHaveLength(43);
    expect(hashSeatToken(`${token.slice(0, -1)}A`)).toHaveLength(43);
    expect(tokenHashesEqual(digest, hashSeatToken(token))).toBe(true);
    expect(tokenHashesEqual(digest, hashSeatToken(`${token.slice(0, -1)}${token.endsWith("A") ? "B" : "A"}`))).toBe(
      false,
    );
    // Different lengths never reach timingSafeEqual (which would throw).
    expect(tokenHashesEqual(digest, "short")).toBe(false);
  });

  it("statistically: answers to a wrong token sharing all but the last character are not faster or slower than to an unrelated one", async () => {
    const target = await startTarget("memory", { LOG_LEVEL: "silent" });
    try {
      const { client } = target;
      const room = await client.pairedRoom();
      const nearMiss = `${room.a.slice(0, -1)}${room.a.endsWith("A") ? "B" : "A"}`;
      const unrelated = mintSeatToken();
      const TRIALS = Number(process.env.DUET_TIMING_TRIALS ?? 600);
      const samples: Record<"near" | "far", number[]> = { near: [], far: [] };
      for (let i = 0; i < 200; i++) await client.status(room.code, unrelated); // warm up
      for (let i = 0; i < TRIALS; i++) {
        // Interleaved, order alternating, so drift on a noisy machine hits both alike.
        for (const which of i % 2 ? (["near", "far"] as const) : (["far", "near"] as const)) {
          const started = process.hrtime.bigint();
          const reply = await client.status(room.code, which === "near" ? nearMiss : unrelated);
          samples[which].push(Number(process.hrtime.bigint() - started) / 1e6);
          expect(reply.status).toBe(401);
        }
      }
      const near = median(samples.near);
      const far = median(samples.far);
      // Paired: each trial's two calls ran back to back, so their difference cancels the
      // machine's drift; its median is the robust estimate of any systematic difference.
      const pairedDifference = median(samples.near.map((ms, i) => ms - samples.far[i]!));
      // Direct: the comparison itself, 100,000 times each.
      const digest = hashSeatToken(room.a);
      const digestNear = hashSeatToken(nearMiss);
      const digestFarPrefix = digest.slice(0, -1) + (digest.endsWith("A") ? "B" : "A"); // digests differing only at the end
      const bench = (other: string) => {
        const started = process.hrtime.bigint();
        for (let i = 0; i < 100_000; i++) tokenHashesEqual(digest, other);
        return Number(process.hrtime.bigint() - started) / 100_000;
      };
      bench(digestNear);
      const nsFirstDiffers = median([bench(digestNear), bench(digestNear), bench(digestNear)]);
      const nsLastDiffers = median([bench(digestFarPrefix), bench(digestFarPrefix), bench(digestFarPrefix)]);
      const figures = {
        trials: TRIALS,
        medianNearMissMs: near,
        medianUnrelatedMs: far,
        medianPairedDifferenceMs: pairedDifference,
        relativeDifference: Math.abs(pairedDifference) / far,
        nsPerCompareDigestDiffersEarly: nsFirstDiffers,
        nsPerCompareDigestDiffersLast: nsLastDiffers,
      };
      console.log(`FIGURES timing ${JSON.stringify(figures)}`);
      // Generous: HTTP round trips on a loaded machine vary by far more than any compare.
      expect(figures.relativeDifference).toBeLessThan(0.15);
      // The nanosecond figures are reported, not asserted: on a shared machine they swing by
      // 20% between runs, far more than timingSafeEqual could differ.
    } finally {
      await target.close();
    }
    // A guard against a hang: 2 × TRIALS calls one after the other, slow on a busy machine.
  }, 300_000);
});

describe("CORS and X-Forwarded-For", () => {
  it("sends no CORS headers to an unknown origin, preflight or not", async () => {
    const target = await startTarget("memory", { LOG_LEVEL: "silent" });
    try {
      const headers = {
        origin: "https://evil.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
      };
      for (const [method, path] of [
        ["OPTIONS", "/v1/send"],
        ["OPTIONS", "/v1/open"],
        ["GET", "/v1/stats"],
        ["POST", "/v1/open"],
      ] as const) {
        const reply = await target.client.call(method, path, { headers, body: method === "POST" ? {} : undefined });
        const cors = [...reply.headers.keys()].filter((name) => name.startsWith("access-control-"));
        expect({ method, path, cors }).toEqual({ method, path, cors: [] });
        expect(reply.status).toBeLessThan(500);
      }
    } finally {
      await target.close();
    }
  });

  it("without TRUST_PROXY, rotating X-Forwarded-For does not escape the room rate limit", async () => {
    const target = await startTarget("redis", { RATE_LIMIT_ROOMS: "5", LOG_LEVEL: "silent" });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) {
        const reply = await target.client.open({ headers: { "x-forwarded-for": `203.0.113.${i + 1}` } });
        statuses.push(reply.status);
      }
      console.log(`FIGURES xff-untrusted ${JSON.stringify({ statuses })}`);
      expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
      expect(statuses.slice(5).every((s) => s === 429)).toBe(true);
    } finally {
      await target.close();
    }
  });

  it("with TRUST_PROXY=1, only the address the trusted proxy appended counts: addresses a client prepends are ignored", async () => {
    const target = await startTarget("redis", { RATE_LIMIT_ROOMS: "5", TRUST_PROXY: "1", LOG_LEVEL: "silent" });
    try {
      const spoofed: number[] = [];
      // The proxy appends the real client (198.51.100.7); the client forged the rest.
      for (let i = 0; i < 8; i++)
        spoofed.push(
          (await target.client.open({ headers: { "x-forwarded-for": `203.0.113.${i + 1}, 198.51.100.7` } })).status,
        );
      // Distinct real clients behind the proxy each get their own budget.
      const distinct: number[] = [];
      for (let i = 0; i < 8; i++)
        distinct.push((await target.client.open({ headers: { "x-forwarded-for": `198.51.100.${100 + i}` } })).status);
      console.log(`FIGURES xff-trusted ${JSON.stringify({ spoofed, distinct })}`);
      expect(spoofed.filter((s) => s === 429)).toHaveLength(3);
      expect(distinct.every((s) => s === 200)).toBe(true);
    } finally {
      await target.close();
    }
  });
});

describe("limits and slow senders", () => {
  const target = useTarget("redis", { LOG_LEVEL: "silent" });

  it("headers: 8 KiB accepted; over the server's 16 KiB header limit 431", async () => {
    const { client } = target();
    const ok = await client.call("GET", "/v1/stats", { headers: { "x-padding": "p".repeat(8 * 1024) } });
    expect(ok.status).toBe(200);
    const big = await client
      .call("GET", "/v1/stats", { headers: { "x-padding": "p".repeat(20 * 1024) } })
      .catch((e) => ({ status: -1, error: String(e) }));
    expect(big.status).toBe(431);
  });

  it("text at 2,097,152 UTF-8 bytes is accepted (also as 2-byte characters); one byte more is 400 too_large; a body over 13 MiB is 400 too_large", async () => {
    const { client } = target();
    for (const [text, expected] of [
      ["a".repeat(MAX_TEXT_BYTES), 200],
      ["é".repeat(MAX_TEXT_BYTES / 2), 200],
      ["a".repeat(MAX_TEXT_BYTES + 1), 400],
      [`${"é".repeat(MAX_TEXT_BYTES / 2 - 1)}abc`, 400],
    ] as const) {
      const room = await client.pairedRoom();
      const reply = await client.send(room.code, room.a, text);
      expect({ bytes: Buffer.byteLength(text), status: reply.status, error: reply.body.error }).toEqual({
        bytes: Buffer.byteLength(text),
        status: expected,
        error: expected === 200 ? undefined : "too_large",
      });
      await client.close(room.code, room.a, true);
    }
    const room = await client.pairedRoom();
    // Escaped control characters: 6 JSON bytes per character, so the text is small enough but the body is not.
    const escaped = `{"code":"${room.code}","text":"${"\\u0001".repeat(Math.ceil(MAX_BODY_BYTES / 6) + 10)}"}`;
    const tooBig = await client.call("POST", "/v1/send", {
      rawBody: escaped,
      token: room.a,
      headers: { "content-type": "application/json" },
    });
    expect({ status: tooBig.status, error: tooBig.body.error }).toEqual({ status: 400, error: "too_large" });
    // The worst legal case: a 2,097,152-byte text written entirely as \u0001 escapes (6 body
    // bytes per text byte, 12.6 MB) fits the body limit and is accepted.
    const underText = "\\u0001".repeat(MAX_TEXT_BYTES);
    const under = await client.call("POST", "/v1/send", {
      rawBody: `{"code":"${room.code}","text":"${underText}"}`,
      token: room.a,
      headers: { "content-type": "application/json" },
    });
    expect(under.status).toBe(200);
    await client.close(room.code, room.a, true);
  }, 120_000);

  it("invalid UTF-8 in a body is 400 bad_request on every JSON endpoint", async () => {
    const { client } = target();
    const room = await client.pairedRoom();
    const bad = Buffer.concat([
      Buffer.from(`{"code":"${room.code}","text":"`),
      Buffer.from([0xc3, 0x28, 0xff]),
      Buffer.from('"}'),
    ]);
    // Every call of the endpoint table that takes a JSON body.
    const bodyPaths = OPERATION_IDS.map((id) => ENDPOINTS[id] as EndpointSpec)
      .filter((spec) => spec.input?.in === "body")
      .map((spec) => spec.path);
    expect(bodyPaths).toContain("/v1/send");
    for (const path of bodyPaths) {
      const reply = await client.call("POST", path, {
        rawBody: bad,
        token: room.a,
        headers: { "content-type": "application/json" },
      });
      expect({ path, status: reply.status, error: reply.body.error }).toEqual({
        path,
        status: 400,
        error: "bad_request",
      });
    }
  });

  it("the slow-client timeouts are set: headers <= 20 s, request 60 s, checked by the relay every second", () => {
    for (const node of target().nodes) {
      expect(node.connectionChecks.options.headersTimeoutMs).toBeLessThanOrEqual(20_000);
      expect(node.connectionChecks.options.requestTimeoutMs).toBe(60_000);
      expect(node.connectionChecks.options.intervalMs).toBe(1000);
      // Node's own sweep is off (connection-checks.ts says why).
      expect(node.server.headersTimeout).toBe(0);
      expect(node.server.requestTimeout).toBe(0);
    }
  });

  it("100 slowloris connections (headers trickled) and 20 trickled bodies do not block other clients", async () => {
    const { client } = target();
    const url = new URL(target().nodes[0]!.url);
    const sockets: Socket[] = [];
    const open = (preamble: string) => {
      const socket = connect(Number(url.port), url.hostname);
      socket.on("error", () => undefined);
      socket.write(preamble);
      sockets.push(socket);
      return socket;
    };
    for (let i = 0; i < 100; i++) open(`GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Slow-${i}: `);
    const room = await client.pairedRoom();
    for (let i = 0; i < 20; i++)
      open(
        `POST /v1/send HTTP/1.1\r\nHost: x\r\nUser-Agent: duet/0.1\r\nAuthorization: Bearer ${room.a}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"code":"${room.code}","text":"`,
      );
    const trickle = setInterval(() => {
      for (const s of sockets) if (s.writable) s.write("a");
    }, 500);
    try {
      const durations: number[] = [];
      for (let i = 0; i < 20; i++) {
        const started = Date.now();
        const sent = await (i % 2 ? client.status(room.code, room.b) : client.open());
        expect(sent.status).toBe(200);
        durations.push(Date.now() - started);
        await sleep(100);
      }
      const still = sockets.filter((s) => !s.destroyed).length;
      console.log(
        `FIGURES slowloris ${JSON.stringify({ slowConnections: sockets.length, stillOpenAfter2s: still, medianNormalCallMs: median(durations), maxNormalCallMs: Math.max(...durations) })}`,
      );
      expect(median(durations)).toBeLessThan(500);
    } finally {
      clearInterval(trickle);
      for (const s of sockets) s.destroy();
    }
  }, 120_000);

  // Node checks these timeouts every 30 s (connectionsCheckingInterval), so closing takes up
  // to headersTimeout + 30 s: too slow for CI. It exists only in DUET_SOAK=1 runs (defined,
  // not skipped, so a normal run reports no skipped test).
  if (process.env.DUET_SOAK === "1")
    it("a connection that trickles its headers is closed by the server within headersTimeout + 30 s", async () => {
      const url = new URL(target().nodes[0]!.url);
      const socket = connect(Number(url.port), url.hostname);
      let closedAt = 0;
      socket.on("close", () => (closedAt = Date.now())).on("error", () => undefined);
      const started = Date.now();
      socket.write("GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Slow: ");
      const trickle = setInterval(() => socket.writable && socket.write("a"), 1000);
      while (!closedAt && Date.now() - started < 60_000) await sleep(250);
      clearInterval(trickle);
      socket.destroy();
      console.log(`FIGURES slowloris-close ${JSON.stringify({ closedAfterMs: closedAt ? closedAt - started : null })}`);
      expect(closedAt).toBeGreaterThan(0);
      expect(closedAt - started).toBeLessThan(20_000 + 30_000 + 2000);
    }, 120_000);
});
