// The duet CLI end to end: two CLI processes, as two agents with their own state
// directories, talk through the real relay. Tokens never show in any output or relay log.
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { runCli, startCli, startRelay, temporaryDir, type CliResult, type RelayProcess } from "../support/processes";

interface StateFileContents {
  rooms: Record<string, { code: string; seat: string; token: string }>;
}

// Each step starts a Node process (the CLI), about 0.3 s on a quiet machine and several
// seconds when three test runs share two cores; a test makes up to twenty. The timeout only
// guards against a hang, so it allows for that.
jest.setTimeout(180_000);

const readState = (dir: string): StateFileContents =>
  JSON.parse(readFileSync(join(dir, "rooms.json"), "utf8")) as StateFileContents;
const modeOf = (path: string) => statSync(path).mode & 0o777;

describe("duet CLI, two agents through the real relay", () => {
  let relay: RelayProcess;
  /** Every stdout and stderr of every CLI run, to check that no token ever leaks. */
  const outputs: CliResult[] = [];
  const tokens: string[] = [];

  beforeAll(async () => {
    relay = await startRelay();
  });
  afterAll(async () => relay.stop());

  const agent = (name: string) => {
    const stateDir = temporaryDir(`duet-cli-${name}-`);
    const run = async (args: string[], stdin?: string) => {
      const result = await runCli(args, { stateDir, url: relay.url, stdin });
      outputs.push(result);
      return result;
    };
    const start = (args: string[]) => {
      const running = startCli(args, { stateDir, url: relay.url });
      void running.done.then((result) => outputs.push(result));
      return running;
    };
    const rememberTokens = () => {
      for (const room of Object.values(readState(stateDir).rooms)) tokens.push(room.token);
    };
    return { stateDir, run, start, rememberTokens };
  };

  it("open, join with the share block, converse with send and watch, close", async () => {
    const alice = agent("alice");
    const bob = agent("bob");

    const opened = await alice.run(["open"]);
    expect(opened).toMatchObject({ code: 0 });
    const share = opened.stdout;
    const code = /[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}/.exec(share)![0];
    expect(share).toContain(`${relay.url}/join/${code}`);
    // The state file is the only place the token lives, readable by its owner only.
    expect(modeOf(join(alice.stateDir, "rooms.json"))).toBe(0o600);
    expect(modeOf(alice.stateDir)).toBe(0o700);
    expect(readState(alice.stateDir).rooms[code]).toMatchObject({ seat: "a" });

    // Bob pastes the whole share block; the relay URL comes from its join address.
    const joined = await runCli(["join", share], { stateDir: bob.stateDir, url: "http://127.0.0.1:9", stdin: "" });
    outputs.push(joined);
    expect(joined).toMatchObject({ code: 0 });
    expect(joined.stdout).toContain(`Joined room ${code} as seat b`);
    expect(modeOf(join(bob.stateDir, "rooms.json"))).toBe(0o600);
    alice.rememberTokens();
    bob.rememberTokens();

    expect(await alice.run(["wait", "--timeout", "5000"])).toMatchObject({ code: 0 });

    const aliceWatch = alice.start(["watch", "--count", "2", "--wait", "5000"]);
    expect(await bob.run(["send", "hello", "from", "bob"])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^\S+\n$/),
    });
    expect(await bob.run(["send"], "two lines\nof text\n")).toMatchObject({ code: 0 });
    expect(await aliceWatch.lines(2)).toEqual(["b: hello from bob", "b: two lines\\nof text"]);
    const watched = await aliceWatch.done;
    expect(watched.code).toBe(0);
    // Nothing extra when stderr is not a terminal: no spinner frames.
    expect(watched.stderr).not.toMatch(/[\r⠋⠙⠹]/);

    const bobWatch = bob.start(["--json", "watch", "--count", "1", "--wait", "5000"]);
    const sent = await alice.run(["--json", "send", "hi bob"]);
    const { id } = JSON.parse(sent.stdout) as { id: string };
    const [line] = await bobWatch.lines(1);
    expect(JSON.parse(line!)).toEqual({ id, from: "a", text: "hi bob" });
    expect(await bobWatch.done).toMatchObject({ code: 0 });

    // Everything was acked by watch, so a plain close succeeds.
    const status = await alice.run(["--json", "status"]);
    expect(JSON.parse(status.stdout)).toMatchObject({
      code,
      seat: "a",
      peer_joined: true,
      pending_in: 0,
      pending_out: 0,
    });
    expect(await alice.run(["close"])).toMatchObject({ code: 0, stdout: `Closed room ${code}.\n` });
    expect(readState(alice.stateDir).rooms).toEqual({});

    // Bob's seat died with the room: exit 4, one line saying what to do, entry removed.
    const gone = await bob.run(["status"]);
    expect(gone.code).toBe(4);
    expect(gone.stderr.trim().split("\n")).toHaveLength(1);
    expect(gone.stderr).toMatch(/^duet: .*duet open/);
    expect(readState(bob.stateDir).rooms).toEqual({});
  });

  /** Requests the relay answered on a route (its duet_http_requests_total), to count calls. */
  const requestsOn = async (route: string) => {
    const text = await (await fetch(`${relay.metricsUrl}/metrics`)).text();
    return text
      .split("\n")
      .filter((line) => line.startsWith("duet_http_requests_total{") && line.includes(`route="${route}"`))
      .reduce((sum, line) => sum + Number(line.split(" ").pop()), 0);
  };

  /** A gauge of the relay's /metrics, e.g. the waiting calls it holds now (duet_waiters_held). */
  const gauge = async (name: string) => {
    const text = await (await fetch(`${relay.metricsUrl}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(`${name} `));
    if (!line) throw new Error(`no ${name} in the relay's /metrics`);
    return Number(line.split(" ")[1]);
  };

  it("the short loop: what recv printed is acked by the next recv or send of the room, with no ack call", async () => {
    const alice = agent("alice-loop");
    const bob = agent("bob-loop");
    const code = JSON.parse((await alice.run(["--json", "open"])).stdout).code as string;
    expect((await bob.run(["join", code])).code).toBe(0);
    alice.rememberTokens();
    bob.rememberTokens();
    const acksBefore = await requestsOn("/v1/ack");

    const question = JSON.parse((await alice.run(["--json", "send", "question?"])).stdout).id as string;
    expect(await bob.run(["recv", "--wait", "5000"])).toMatchObject({ code: 0, stdout: "a: question?\n" });
    // Printed, not acked yet: the peer still sees it unread.
    expect(JSON.parse((await alice.run(["--json", "status"])).stdout).unread).toEqual([question]);
    // Bob's answer carries the receipt.
    const answer = JSON.parse((await bob.run(["--json", "send", "answer."])).stdout).id as string;
    expect(JSON.parse((await alice.run(["--json", "status"])).stdout).unread).toEqual([]);
    // Alice reads the answer; her next recv acks it before it waits (here: answers empty).
    expect(JSON.parse((await alice.run(["--json", "recv", "--wait", "5000"])).stdout).messages).toEqual([
      { id: answer, from: "b", text: "answer." },
    ]);
    expect(JSON.parse((await alice.run(["--json", "recv", "--wait", "0"])).stdout).messages).toEqual([]);
    expect(JSON.parse((await bob.run(["--json", "status"])).stdout).unread).toEqual([]);
    expect(await requestsOn("/v1/ack")).toBe(acksBefore);
    // `send --no-ack` leaves what recv printed unacked; `close` acks it first, so it is not refused.
    await alice.run(["send", "last word"]);
    await bob.run(["recv", "--wait", "5000"]);
    await bob.run(["send", "--no-ack", "bye"]);
    expect(JSON.parse((await alice.run(["--json", "status"])).stdout).unread).toHaveLength(1);
    await alice.run(["recv", "--wait", "5000"]);
    expect(await alice.run(["close"])).toMatchObject({ code: 6 });
    expect(await bob.run(["close"])).toMatchObject({ code: 0 });
  });

  it("--json on every command, recv without and with --ack, ack by id, close refused while unread", async () => {
    const alice = agent("alice-json");
    const bob = agent("bob-json");
    const opened = JSON.parse((await alice.run(["--json", "open"])).stdout) as Record<string, unknown>;
    expect(Object.keys(opened).sort()).toEqual(["code", "expires_in", "join_url", "seat", "share"]);
    const code = opened.code as string;
    const joined = JSON.parse((await bob.run(["join", "--json", String(opened.join_url)])).stdout) as Record<
      string,
      unknown
    >;
    expect(joined).toEqual({ code, seat: "b", expires_in: expect.any(Number) });
    alice.rememberTokens();
    bob.rememberTokens();

    expect(JSON.parse((await alice.run(["--json", "wait"])).stdout)).toMatchObject({ code, peer_joined: true });
    const first = JSON.parse((await alice.run(["--json", "send", "first"])).stdout) as { id: string };
    const second = JSON.parse((await alice.run(["--json", "send", "second"])).stdout) as { id: string };

    const peek = JSON.parse((await bob.run(["--json", "recv", "--wait", "0"])).stdout) as {
      messages: Array<{ id: string }>;
    };
    expect(peek.messages.map((m) => m.id)).toEqual([first.id, second.id]);
    // Close is refused while messages are unread: exit 6 and a JSON error line on stderr.
    const refused = await alice.run(["--json", "close"]);
    expect(refused.code).toBe(6);
    expect(JSON.parse(refused.stderr)).toMatchObject({ error: "unread", exit_code: 6 });
    expect(readState(alice.stateDir).rooms[code]).toBeDefined();

    expect(JSON.parse((await bob.run(["--json", "ack", first.id])).stdout)).toEqual({ code, acked: 1 });
    await alice.run(["send", "third"]);
    // The second was printed by the peek: this recv acks it before reading, and --ack acks what it prints.
    const rest = await bob.run(["recv", "--wait", "0", "--ack"]);
    expect(rest).toMatchObject({ code: 0, stdout: "a: third\n" });
    expect(JSON.parse((await bob.run(["--json", "recv", "--wait", "0"])).stdout)).toEqual({ code, messages: [] });

    expect(JSON.parse((await bob.run(["--json", "rooms"])).stdout)).toEqual({
      rooms: [{ code, seat: "b", base_url: relay.url, since: expect.any(String) }],
    });
    expect(JSON.parse((await bob.run(["--json", "stats"])).stdout)).toMatchObject({
      sessions: expect.any(Number),
      messages: expect.any(Number),
    });
    expect(JSON.parse((await bob.run(["--json", "close"])).stdout)).toEqual({ code, ok: true });
    // The peer's close removed the room; Alice's close says how it ended, tidies her entry and still succeeds.
    const aliceClose = await alice.run(["--json", "close"]);
    expect(aliceClose).toMatchObject({ code: 0 });
    expect(JSON.parse(aliceClose.stdout)).toEqual({
      code,
      ok: true,
      ended: { reason: "closed", by: "b", at: expect.any(String) },
    });
    expect(readState(alice.stateDir).rooms).toEqual({});
  });

  it("watch ends cleanly when the peer closes the room", async () => {
    const alice = agent("alice-close");
    const bob = agent("bob-close");
    const { stdout } = await alice.run(["open"]);
    // The share block can also come on stdin.
    expect(await bob.run(["join", "-"], stdout)).toMatchObject({ code: 0 });
    alice.rememberTokens();
    bob.rememberTokens();
    const heldBefore = await gauge("duet_waiters_held");
    const watching = bob.start(["watch", "--wait", "10000"]);
    // Closed while watch waits: once the relay holds its stream (or recv), not after a guess of
    // time; one more than before it started (another test's waiter does not count). A watch
    // that exits first fails here, not at jest's timeout.
    let exited = false;
    void watching.done.then(() => (exited = true));
    while ((await gauge("duet_waiters_held")) <= heldBefore) {
      if (exited) throw new Error(`watch exited before the relay held it: ${JSON.stringify(await watching.done)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await alice.run(["close", "--force"])).toMatchObject({ code: 0 });
    const ended = await watching.done;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toMatch(/The room ended: your peer \(seat a\) closed it at \S+ with every message read/);
    expect(readState(bob.stateDir).rooms).toEqual({});
    // Later commands still say how it ended: exit 4, and close exits 0.
    const status = await bob.run(["status"]);
    expect(status.code).toBe(4);
    expect(status.stderr).toMatch(/^duet: Room \S+ has ended\. The room ended: your peer \(seat a\) closed it/);
    const closed = await bob.run(["close"]);
    expect(closed.code).toBe(0);
    expect(closed.stdout).toMatch(/had already ended\. The room ended: your peer \(seat a\) closed it/);
    expect(closed.stdout).not.toMatch(/duet join/);
  });

  it("watch --json ends with the room's ending as its last line, and exit 0", async () => {
    const alice = agent("alice-json-end");
    const bob = agent("bob-json-end");
    const { stdout } = await alice.run(["open"]);
    expect((await bob.run(["join", stdout])).code).toBe(0);
    alice.rememberTokens();
    bob.rememberTokens();
    const watching = bob.start(["--json", "watch", "--wait", "10000"]);
    expect((await alice.run(["send", "ping"])).code).toBe(0);
    const [printed] = await watching.lines(1);
    expect(JSON.parse(printed!)).toMatchObject({ from: "a", text: "ping" });
    // Once watch acked it, a plain close ends the room with every message read.
    expect((await alice.run(["wait", "--read", "last", "--timeout", "30000"])).code).toBe(0);
    expect((await alice.run(["close"])).code).toBe(0);
    const ended = await watching.done;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toBe("");
    const lines = ended.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    const end = JSON.parse(lines[1]!);
    expect(end).toEqual({ event: "end", reason: "closed", by: "a", at: expect.any(String) });
    expect(Number.isNaN(Date.parse(end.at))).toBe(false);
    expect(readState(bob.stateDir).rooms).toEqual({});
  });

  it("recv and status on a room the peer force-closed say what was abandoned", async () => {
    const alice = agent("alice-force");
    const bob = agent("bob-force");
    const { stdout } = await alice.run(["open"]);
    expect((await bob.run(["join", stdout])).code).toBe(0);
    alice.rememberTokens();
    bob.rememberTokens();
    expect((await bob.run(["send", "unread one"])).code).toBe(0);
    expect((await alice.run(["close"])).code).toBe(6);
    expect((await alice.run(["close", "--force"])).code).toBe(0);
    const recv = await bob.run(["--json", "recv", "--wait", "0"]);
    expect(recv.code).toBe(4);
    expect(JSON.parse(recv.stderr)).toMatchObject({
      error: "not_found",
      exit_code: 4,
      ended: { reason: "force_closed", by: "a", abandoned: { in: 0, out: 1 } },
    });
    expect(JSON.parse(recv.stderr).message).toContain(
      "0 messages to you that you had not acked, 1 message from you that the peer had not acked",
    );
    const code = /[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}/.exec(stdout)![0];
    // --code finds the ended room too, and never advises joining it.
    const closed = await bob.run(["close", "--code", code]);
    expect(closed.code).toBe(0);
    expect(closed.stdout).toContain("closed it with force");
    const again = await bob.run(["close", "--code", code]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/nothing to close here/);
    expect(again.stderr).not.toMatch(/duet join/);
  });

  it("Ctrl-C stops watch promptly with exit 130", async () => {
    const alice = agent("alice-int");
    const bob = agent("bob-int");
    const { stdout } = await alice.run(["open"]);
    expect((await bob.run(["join", stdout])).code).toBe(0);
    alice.rememberTokens();
    bob.rememberTokens();
    const watching = alice.start(["watch", "--wait", "20000"]);
    // Once it printed a message, watch is surely running its loop (and handling signals).
    expect((await bob.run(["send", "ping"])).code).toBe(0);
    expect(await watching.lines(1)).toEqual(["b: ping"]);
    const started = Date.now();
    watching.child.kill("SIGINT");
    const ended = await watching.done;
    expect(ended.code).toBe(130);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await alice.run(["close"])).toMatchObject({ code: 0 });
  });

  it("one clear line and a distinct exit code per error class", async () => {
    const carol = agent("carol");
    const noRoom = await carol.run(["status"]);
    expect(noRoom.code).toBe(2);
    expect(noRoom.stderr).toBe(
      "duet: No room yet: run `duet open`, or `duet join <code>` with the code you were given.\n",
    );

    expect((await carol.run(["join", "nothing to see here"])).code).toBe(2);
    expect((await carol.run(["recv", "--wait", "99999"])).code).toBe(2);
    expect((await carol.run(["frobnicate"])).code).toBe(2);

    const unreachable = await runCli(["--json", "open"], { stateDir: carol.stateDir, url: "http://127.0.0.1:9" });
    outputs.push(unreachable);
    expect(unreachable.code).toBe(3);
    expect(JSON.parse(unreachable.stderr)).toMatchObject({ error: "network", exit_code: 3 });

    const { stdout: lonely } = await carol.run(["open"]);
    carol.rememberTokens();
    // Without --timeout, watch would wait for a message that never comes: exit 9 and the
    // timeout error are the timeout's doing (no wall-clock bound: one took 8.2 s under load).
    const quiet = await carol.run(["--json", "watch", "--count", "1", "--timeout", "800"]);
    expect(quiet.code).toBe(9);
    // The --timeout ended it (not a long-poll's 25 s wait): watch says so in these words.
    expect(JSON.parse(quiet.stderr)).toMatchObject({
      error: "timeout",
      exit_code: 9,
      message: "Got 0 of 1 messages within 800 ms.",
    });
    expect((await carol.run(["close"])).code).toBe(0);
    expect(lonely).toContain("duet room");

    const unknown = await carol.run(["join", "zzzz-zzzz-zzzz"]);
    expect(unknown.code).toBe(4);

    const { stdout: share } = await carol.run(["open"]);
    carol.rememberTokens();
    // The same state file cannot take the second seat of its own room.
    const self = await carol.run(["join", share]);
    expect(self.code).toBe(2);
    expect(self.stderr).toMatch(/DUET_STATE_DIR/);
    const dave = agent("dave");
    const erin = agent("erin");
    expect((await dave.run(["join", share])).code).toBe(0);
    dave.rememberTokens();
    // Joining again from the state dir that holds seat b says so, and blames nobody.
    const rejoin = await dave.run(["join", share]);
    expect(rejoin.code).toBe(2);
    expect(rejoin.stderr).toMatch(/already holds seat b of room/);
    expect(rejoin.stderr).not.toMatch(/second agent/);
    const full = await erin.run(["join", share]);
    expect(full.code).toBe(5);
    expect(full.stderr).toMatch(/^duet: .*new room/);
    expect(full.stderr).not.toMatch(/taken[\s\S]*taken/);

    // Two rooms in one state file: commands need --code.
    await carol.run(["open"]);
    carol.rememberTokens();
    const ambiguous = await carol.run(["status"]);
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toMatch(/--code/);
    const code = /[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}/.exec(share)![0];
    expect((await carol.run(["status", "--code", code.toUpperCase()])).code).toBe(0);
    // Once the peer closed the first room, its stale entry no longer makes commands ambiguous.
    expect((await dave.run(["close", "--force"])).code).toBe(0);
    const second = await carol.run(["--json", "status"]);
    expect(second.code).toBe(0);
    expect(JSON.parse(second.stdout).code).not.toBe(code);
    expect(Object.keys(readState(carol.stateDir).rooms)).toEqual([JSON.parse(second.stdout).code]);

    const help = await carol.run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Exit codes:[\s\S]*6 +unread/);
  });

  // Runs last: it looks at every output of every test above.
  it("no seat token appears in any CLI output (plain or --json) nor in the relay's log", () => {
    expect(tokens.length).toBeGreaterThanOrEqual(6);
    expect(outputs.length).toBeGreaterThanOrEqual(40);
    for (const token of tokens) {
      expect(token.length).toBeGreaterThanOrEqual(40);
      for (const output of outputs) {
        expect(output.stdout).not.toContain(token);
        expect(output.stderr).not.toContain(token);
      }
      expect(relay.logs()).not.toContain(token);
    }
    expect(relay.logs()).toContain('"route":"/v1/send"');
  });
});
