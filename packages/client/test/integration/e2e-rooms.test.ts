// End-to-end encrypted rooms, CLI to CLI through the real relay on a real Redis: the relay
// and its Redis only ever hold ciphertext; both sides read plain text; envelopes made by the
// CLI open with the openssl recipe of docs/encryption.md and the reverse; tampered, replayed,
// reflected and wrongly keyed messages, and plain text into an encrypted room, are refused.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { USER_AGENT } from "@duet/protocol";
import { runRecipe } from "../support/openssl-recipe";
import { runCli, startCli, startRedis, startRelay, temporaryDir, type RelayProcess } from "../support/processes";

// Each CLI step starts a Node process: seconds when test runs share two cores. The timeout
// only guards against a hang (as in cli.test.ts).
jest.setTimeout(180_000);

interface StateFile {
  rooms: Record<
    string,
    { code: string; seat: string; token: string; e2e?: { key: string; sentSeq: number; recvSeq: number } }
  >;
}

describe("end-to-end encrypted rooms, CLI to CLI through a relay on Redis", () => {
  let redis: { url: string; stop(): Promise<void> };
  let relay: RelayProcess;
  const dirs: string[] = [];
  /** Every stdout and stderr of every CLI run. */
  const outputs: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    relay = await startRelay({ REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await relay.stop();
    await redis.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const agent = (name: string) => {
    const stateDir = temporaryDir(`duet-e2e-${name}-`);
    dirs.push(stateDir);
    const run = async (args: string[], stdin?: string) => {
      const result = await runCli(args, { stateDir, url: relay.url, stdin });
      outputs.push(result.stdout, result.stderr);
      return result;
    };
    const start = (args: string[]) => {
      const running = startCli(args, { stateDir, url: relay.url });
      void running.done.then((result) => outputs.push(result.stdout, result.stderr));
      return running;
    };
    const seat = (code: string) =>
      (JSON.parse(readFileSync(join(stateDir, "rooms.json"), "utf8")) as StateFile).rooms[code]!;
    return { stateDir, run, start, seat };
  };

  /** A raw HTTP call as one seat (what a relay operator, or an agent without the CLI, sees). */
  const http = async (method: string, path: string, token?: string, body?: unknown) => {
    const response = await fetch(relay.url + path, {
      method,
      headers: {
        "User-Agent": USER_AGENT,
        "Content-Type": "application/json",
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, text, json: () => JSON.parse(text) };
  };
  const pending = async (code: string, token: string) =>
    (
      (await http("GET", `/v1/recv?code=${code}&wait=0`, token)).json() as {
        messages: { id: string; from: string; text: string }[];
      }
    ).messages;

  /** Every key and value in Redis, as text. */
  const redisDump = (): string => {
    const port = new URL(redis.url).port;
    const cli = (...args: string[]) => execFileSync("redis-cli", ["-p", port, "--raw", ...args], { encoding: "utf8" });
    const keys = cli("--scan").split("\n").filter(Boolean);
    expect(keys.length).toBeGreaterThan(0);
    return keys
      .map((key) => {
        const type = cli("TYPE", key).trim();
        const read: Record<string, string[]> = {
          string: ["GET", key],
          hash: ["HGETALL", key],
          list: ["LRANGE", key, "0", "-1"],
          set: ["SMEMBERS", key],
          zset: ["ZRANGE", key, "0", "-1", "WITHSCORES"],
        };
        return `${key} ${type}\n${read[type] ? cli(...read[type]!) : ""}`;
      })
      .join("\n");
  };

  async function encryptedPair() {
    const alice = agent("alice");
    const bob = agent("bob");
    const opened = await alice.run(["open", "--e2e"]);
    expect(opened.code).toBe(0);
    const share = opened.stdout;
    const code = /\/join\/([0-9a-z-]{14})#k=/.exec(share)![1]!;
    const key = alice.seat(code).e2e!.key;
    expect(share).toContain(`${relay.url}/join/${code}#k=${key}`);
    expect(share).toMatch(/end-to-end encrypted/i);
    // The key is printed only inside the share block, on stdout, and there only as part of
    // the join address (the address and the one-line CLI download both carry it).
    const joinAddress = `${relay.url}/join/${code}#k=${key}`;
    expect(share.split(key).length).toBe(share.split(joinAddress).length);
    expect(opened.stderr).not.toContain(key);
    const joined = await bob.run(["join", share]);
    expect(joined).toMatchObject({ code: 0 });
    expect(joined.stdout).toContain(`Joined room ${code} as seat b`);
    expect(joined.stdout + joined.stderr).not.toContain(key);
    expect(bob.seat(code).e2e!.key).toBe(key);
    return { alice, bob, code, key };
  }

  it("carries only ciphertext: the canary is in no Redis key or value, relay log, metric or answer; both sides read it", async () => {
    const { alice, bob, code, key } = await encryptedPair();
    const canary = `canary-${randomBytes(8).toString("hex")}`;
    const reply = `reply-${randomBytes(8).toString("hex")}`;

    const bobWatch = bob.start(["watch", "--count", "1", "--wait", "5000"]);
    expect(await alice.run(["send", `first ${canary}`])).toMatchObject({ code: 0 });
    expect(await bobWatch.lines(1)).toEqual([`a: first ${canary}`]);
    expect(await bobWatch.done).toMatchObject({ code: 0 });

    expect(await bob.run(["send", `${reply} to ${canary}`])).toMatchObject({ code: 0 });
    // Pending on the relay right now: the envelope from bob, and one more from alice.
    expect(await alice.run(["send"], `second ${canary}\nwith two lines\n`)).toMatchObject({ code: 0 });

    const seen = [
      redisDump(),
      relay.logs(),
      await (await fetch(`${relay.metricsUrl}/metrics`)).text(),
      (await http("GET", "/v1/stats")).text,
    ];
    const aliceInbox = await pending(code, alice.seat(code).token);
    const bobInbox = await pending(code, bob.seat(code).token);
    seen.push(
      JSON.stringify(aliceInbox),
      JSON.stringify(bobInbox),
      (await http("GET", `/v1/status?code=${code}`, bob.seat(code).token)).text,
    );
    seen.push((await http("GET", `/join/${code}`)).text);
    expect(aliceInbox).toHaveLength(1);
    expect(bobInbox).toHaveLength(1);
    expect(aliceInbox[0]!.text).toMatch(/^duet-e2e:v1:/);
    expect(seen.join("\n")).toContain(bobInbox[0]!.text); // the dump holds the envelopes...
    for (const secret of [
      canary,
      reply,
      key,
      Buffer.from(key, "base64url").toString("hex"),
      Buffer.from(key, "base64url").toString("base64"),
    ]) {
      expect(seen.join("\n")).not.toContain(secret); // ...and never the text or the key
    }

    const aliceRecv = await alice.run(["recv", "--wait", "0", "--ack"]);
    expect(aliceRecv).toMatchObject({ code: 0, stdout: `b: ${reply} to ${canary}\n` });
    const bobRecv = await bob.run(["recv", "--wait", "0"]);
    expect(bobRecv).toMatchObject({ code: 0, stdout: `a: second ${canary}\\nwith two lines\n` });
    // recv does not consume: the same message again (a peek, which acks nothing) is the same message, not a replay.
    expect(await bob.run(["--json", "recv", "--wait", "0", "--peek"])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining(`"seq":2`),
    });
    // Only in the one share block (the join address, printed there twice: as itself and in the
    // one-line CLI download), nowhere else in any output of either CLI.
    const all = outputs.join("\n");
    expect(all.split(key).length).toBe(all.split(`/join/${code}#k=${key}`).length);
    expect(all.split(key).length - 1).toBe(2);
  });

  it("an envelope made by the CLI opens with the openssl recipe of the docs, and one made with openssl opens in the CLI", async () => {
    const { alice, bob, code, key } = await encryptedPair();
    const text = `from the CLI ${randomBytes(4).toString("hex")} ✓`;
    expect(await alice.run(["send", text])).toMatchObject({ code: 0 });
    const [message] = await pending(code, bob.seat(code).token);
    expect(runRecipe(`duet_open a2b "$ENVELOPE"`, { CODE: code, K: key, ENVELOPE: message!.text })).toBe(`1\n${text}`);
    expect(await bob.run(["recv", "--wait", "0", "--ack"])).toMatchObject({ code: 0, stdout: `a: ${text}\n` });

    // Bob without his CLI: seal with openssl as seat b (direction b2a, his first message) and POST it.
    const byHand = `sealed with openssl ${randomBytes(4).toString("hex")}\nsecond line`;
    const envelope = runRecipe(`duet_seal b2a 1 "$TEXT"`, { CODE: code, K: key, TEXT: byHand }).trim();
    expect((await http("POST", "/v1/send", bob.seat(code).token, { code, text: envelope })).status).toBe(200);
    expect(await alice.run(["recv", "--wait", "0", "--ack"])).toMatchObject({
      code: 0,
      stdout: `b: ${byHand.replace("\n", "\\n")}\n`,
    });
  });

  it("refuses tampered, replayed and reflected messages without printing them, and plain text into the room", async () => {
    const { alice, bob, code, key } = await encryptedPair();
    const aliceToken = alice.seat(code).token;
    const secret = `never-shown-${randomBytes(4).toString("hex")}`;

    // Tampered: seal as alice (a2b, seq 1), flip one bit of the ciphertext, send it raw.
    const sealed = runRecipe(`duet_seal a2b 1 "$TEXT"`, { CODE: code, K: key, TEXT: secret }).trim();
    const parts = sealed.split(":");
    const ciphertext = Buffer.from(parts[3]!, "base64");
    ciphertext[0]! ^= 0x01;
    parts[3] = ciphertext.toString("base64");
    const tampered = await http("POST", "/v1/send", aliceToken, { code, text: parts.join(":") });
    expect(tampered.status).toBe(200);
    let recv = await bob.run(["recv", "--wait", "0"]);
    expect(recv.code).toBe(10);
    expect(recv.stdout).toBe("");
    expect(recv.stderr).toMatch(
      /refused: it failed authentication: it was altered after it was sealed, or your room key is wrong/,
    );
    const tamperedId = tampered.json().id as string;
    expect(await bob.run(["ack", tamperedId])).toMatchObject({ code: 0 });

    // The genuine message reads; sent again under a new id it is a replay.
    const genuine = await http("POST", "/v1/send", aliceToken, { code, text: sealed });
    expect(await bob.run(["recv", "--wait", "0", "--ack"])).toMatchObject({ code: 0, stdout: `a: ${secret}\n` });
    expect(genuine.status).toBe(200);
    expect((await http("POST", "/v1/send", aliceToken, { code, text: sealed })).status).toBe(200);
    recv = await bob.run(["watch", "--count", "1", "--wait", "0", "--timeout", "5000"]);
    expect(recv.code).toBe(10);
    expect(recv.stdout).toBe("");
    expect(recv.stderr).toMatch(
      /refused: it repeats or precedes a message already read from the peer \(replayed or reordered\)/,
    );
    const [replayed] = await pending(code, bob.seat(code).token);
    expect(await bob.run(["ack", replayed!.id])).toMatchObject({ code: 0 });

    // Reflected: bob's own envelope, sent back to him by the other seat.
    expect(await bob.run(["send", `bob says ${secret}`])).toMatchObject({ code: 0 });
    const [fromBob] = await pending(code, aliceToken);
    expect((await http("POST", "/v1/send", aliceToken, { code, text: fromBob!.text })).status).toBe(200);
    recv = await bob.run(["recv", "--wait", "0"]);
    expect(recv.code).toBe(10);
    expect(recv.stdout).toBe("");
    expect(recv.stderr).toMatch(/refused: it is one of your own messages sent back to you \(reflected\)/);

    // Plain text into the encrypted room: refused by the relay with a catalogued error.
    const plain = await http("POST", "/v1/send", aliceToken, { code, text: `plain ${secret}` });
    expect(plain.status).toBe(400);
    expect(plain.json()).toEqual({ error: "e2e_required", message: expect.stringMatching(/end-to-end encrypted/) });
    expect(JSON.stringify(await pending(code, bob.seat(code).token))).not.toContain(secret);
  });

  it("a wrong key reads nothing; a seat without the key is told what it needs; a text that cannot fit is refused with the limit", async () => {
    const alice = agent("alice");
    const bob = agent("bob");
    const carol = agent("carol");
    const share = (await alice.run(["open", "--e2e"])).stdout;
    const code = /\/join\/([0-9a-z-]{14})#k=/.exec(share)![1]!;
    const wrongKey = randomBytes(32).toString("base64url");
    expect(await bob.run(["join", share.replace(/#k=[A-Za-z0-9_-]{43}/, `#k=${wrongKey}`)])).toMatchObject({ code: 0 });
    expect(await alice.run(["send", "for the right key only"])).toMatchObject({ code: 0 });
    const recv = await bob.run(["recv", "--wait", "0"]);
    expect(recv).toMatchObject({ code: 10, stdout: "" });
    expect(recv.stderr).toMatch(
      /failed authentication: .*or your room key is wrong \(check the #k= part of the join address/,
    );

    // Carol joins a second encrypted room by its bare code: she gets the seat, and is told she lacks the key.
    const share2 = (await alice.run(["open", "--e2e"])).stdout;
    const code2 = /\/join\/([0-9a-z-]{14})#k=/.exec(share2)![1]!;
    const joined = await carol.run(["join", code2]);
    expect(joined.code).toBe(10);
    expect(joined.stderr).toMatch(/end-to-end encrypted and what you passed holds no key \(#k=…\)/);
    const noKey = await carol.run(["--code", code2, "send", "hi"]);
    expect(noKey.code).toBe(10);
    expect(noKey.stderr).toMatch(/no room key/);
    // The address with the key completes her seat.
    expect(await carol.run(["join", share2])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining("Room key added"),
    });
    expect(await carol.run(["--code", code2, "send", "hi"])).toMatchObject({ code: 0 });
    expect(await alice.run(["--code", code2, "recv", "--wait", "0"])).toMatchObject({ code: 0, stdout: "b: hi\n" });

    // Too large for an envelope, though within 2 MiB of plain text.
    const tooLarge = await alice.run(["--code", code2, "send"], "x".repeat(1_600_000));
    expect(tooLarge.code).toBe(8);
    expect(tooLarge.stderr).toContain("at most 1572799 fit");
    expect(code).not.toBe(code2);
  });
});
