// Read receipts through the CLI against the real relay: `duet status` lists this seat's
// unread ids, `duet watch` prints the receipts its stream carries, `duet send --wait-read`
// and `duet wait --read <id|last>` return once the peer has acked, and exit 9 when the time
// runs out first (docs/protocol.md §6.6: status `unread`, status waits with until_read, the
// stream's `read` event).
import { runCli, startCli, startRelay, temporaryDir, type RelayProcess } from "../support/processes";

jest.setTimeout(180_000);

describe("read receipts in the CLI", () => {
  let relay: RelayProcess;
  beforeAll(async () => {
    relay = await startRelay();
  });
  afterAll(async () => relay.stop());

  const agent = (name: string) => {
    const stateDir = temporaryDir(`duet-receipts-${name}-`);
    return {
      run: (args: string[]) => runCli(args, { stateDir, url: relay.url }),
      start: (args: string[]) => startCli(args, { stateDir, url: relay.url }),
    };
  };

  /** Resolves once the relay counts exactly `count` open streams (its duet_streams_open gauge). */
  const streamsOpen = async (count: number) => {
    for (;;) {
      const metrics = await (await fetch(`${relay.metricsUrl}/metrics`)).text();
      const open = Number(/^duet_streams_open (\d+)/m.exec(metrics)?.[1] ?? 0);
      if (open === count) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it("status lists unread ids, watch prints receipts, send --wait-read and wait --read return once read", async () => {
    const alice = agent("alice");
    const bob = agent("bob");
    const opened = await alice.run(["--json", "open"]);
    const { code } = JSON.parse(opened.stdout) as { code: string };
    expect((await bob.run(["join", code])).code).toBe(0);

    // status: the ids of alice's messages bob has not read.
    expect(JSON.parse((await alice.run(["--json", "status"])).stdout).unread).toEqual([]);
    const one = (await alice.run(["send", "one"])).stdout.trim();
    expect(JSON.parse((await alice.run(["--json", "status"])).stdout).unread).toEqual([one]);
    expect((await alice.run(["status"])).stdout).toContain(`unread:      ${one}`);

    // watch: the receipt of "one" as bob acks it, then bob's reply.
    const watching = alice.start(["--json", "watch", "--count", "1"]);
    await streamsOpen(1);
    expect(await bob.run(["recv", "--ack", "--wait", "0"])).toMatchObject({ code: 0, stdout: "a: one\n" });
    expect(await bob.run(["send", "reply"])).toMatchObject({ code: 0 });
    const lines = (await watching.lines(2)).map((line) => JSON.parse(line));
    expect(lines[0]).toEqual({ event: "read", ids: [one] });
    expect(lines[1]).toMatchObject({ from: "b", text: "reply" });
    expect((await watching.done).code).toBe(0);
    await streamsOpen(0); // that watch's stream is gone, so the next one counted is the new one
    const plainWatch = alice.start(["watch", "--count", "1"]);
    await streamsOpen(1);
    const two = (await alice.run(["send", "two"])).stdout.trim();
    expect((await bob.run(["recv", "--ack", "--wait", "0"])).code).toBe(0);
    expect(await plainWatch.lines(1)).toEqual([`read: ${two}`]);
    expect((await bob.run(["send", "ok"])).code).toBe(0);
    expect((await plainWatch.done).code).toBe(0);

    // send --wait-read: the id at once on stdout, exit 0 once bob has read it.
    const sending = alice.start(["send", "--wait-read", "three"]);
    const [three] = await sending.lines(1);
    expect(JSON.parse((await alice.run(["--json", "status"])).stdout).unread).toEqual([three]);
    expect(await bob.run(["recv", "--ack", "--wait", "0"])).toMatchObject({ code: 0, stdout: "a: three\n" });
    const sent = await sending.done;
    expect(sent).toMatchObject({ code: 0, stdout: `${three}\n` });
    expect(sent.stderr).toContain(`Message ${three} was read.`);

    // wait --read last: the last id this seat sent.
    const four = (await alice.run(["send", "four"])).stdout.trim();
    const waiting = alice.start(["--json", "wait", "--read", "last"]);
    expect((await bob.run(["recv", "--ack", "--wait", "0"])).code).toBe(0);
    const waited = await waiting.done;
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout)).toEqual({ code, id: four, read: true, unread: [] });
    // Already read: at once.
    expect(await alice.run(["wait", "--read", four])).toMatchObject({ code: 0, stdout: `Message ${four} was read.\n` });

    // Not read in time: exit 9, the id is known, and no advice to send it again.
    // Nobody reads "five": the wait runs out. Long enough for the send itself to be answered
    // first, however busy the machine (a CLI process start alone took seconds in CI).
    const late = await alice.run(["--json", "send", "--wait-read", "--timeout", "8000", "five"]);
    expect(late.code).toBe(9);
    const five = JSON.parse(late.stdout) as { id: string; read: boolean };
    expect(five).toMatchObject({ code, read: false });
    expect(JSON.parse(late.stderr)).toMatchObject({ error: "timeout", exit_code: 9 });
    expect(JSON.parse(late.stderr).message).toContain(`duet wait --read ${five.id}`);
    const notYet = await alice.run(["wait", "--read", "last", "--timeout", "1000"]);
    expect(notYet.code).toBe(9);
    expect(notYet.stderr).toContain(`Message ${five.id} was not read within 1000 ms.`);

    // The peer reads and closes: read, and the room is over (closed, every message read).
    const last = alice.start(["send", "--wait-read", "bye"]);
    await last.lines(1);
    expect((await bob.run(["recv", "--ack", "--wait", "0"])).code).toBe(0);
    expect((await bob.run(["close"])).code).toBe(0);
    const finished = await last.done;
    expect(finished.code).toBe(0);
    expect(finished.stderr).toMatch(/was read\./);
    expect((await alice.run(["status"])).code).toBe(4);
  });

  it("a wait for a read that cannot come: the room ends with the message unread (exit 4), a seat that sent nothing (exit 2)", async () => {
    const alice = agent("alice-2");
    const bob = agent("bob-2");
    const { code } = JSON.parse((await alice.run(["--json", "open"])).stdout) as { code: string };
    expect((await bob.run(["join", code])).code).toBe(0);
    const none = await bob.run(["wait", "--read", "last"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/sent nothing/);
    const waiting = alice.start(["send", "--wait-read", "never read"]);
    await waiting.lines(1);
    expect((await bob.run(["close", "--force"])).code).toBe(0);
    const result = await waiting.done;
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/closed it with force/);
  });
});
