// The node's waiter cap (MAX_WAITERS, src/realtime/admission.ts; docs/protocol.md §10):
// past it a new waiting call is answered 503 `unavailable` with Retry-After, a call whose
// answer is there at once is still served, /readyz stays ready (any client can fill the cap:
// docs/protocol.md §11.5), and the waiters already held are answered as usual. Each node has
// its own cap: every call goes to node 0.
// Every step waits on the node's own count of its waiters (its /metrics), never on time.
import { BEHAVIOUR_TARGETS, forEachTarget, type RelayTarget } from "../support/targets";

const CAP = 2;
const SOME: string[] = ["memory", "redis", "process"];
const KINDS = BEHAVIOUR_TARGETS.some((kind) => SOME.includes(kind))
  ? BEHAVIOUR_TARGETS.filter((kind) => SOME.includes(kind))
  : BEHAVIOUR_TARGETS;

/** A sample of the node's /metrics (the render is not cached here: METRICS_CACHE_MS=0). */
async function sample(target: RelayTarget, name: string): Promise<number> {
  const { text } = await target.client.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`no ${name} in /metrics`);
  return Number(line.split(" ")[1]);
}

/** Until the node holds `count` waiting recvs (the waiters registered: an event, not a time). */
async function untilWaiting(target: RelayTarget, count: number): Promise<void> {
  while ((await sample(target, "duet_recv_waiting")) !== count) await new Promise((r) => setTimeout(r, 20));
}

forEachTarget(
  (target) => {
    it("past MAX_WAITERS refuses new waiters 503 with Retry-After and stays ready; held waiters are answered; below the cap it admits again", async () => {
      const { client } = target();
      const abort = new AbortController();
      const [one, two, three] = [await client.pairedRoom(), await client.pairedRoom(), await client.pairedRoom()];
      const held = [
        client.recv(one.code, one.b, 25_000, { signal: abort.signal, node: 0 }),
        client.recv(two.code, two.b, 25_000, { signal: abort.signal, node: 0 }),
      ];
      try {
        await untilWaiting(target(), CAP);
        expect(await sample(target(), "duet_waiters_max")).toBe(CAP);

        // A third waiting recv, a waiting status and a stream: refused, with Retry-After.
        const refusedRecv = await client.recv(one.code, one.a, 25_000, { node: 0 });
        expect(refusedRecv.status).toBe(503);
        expect(refusedRecv.body).toMatchObject({ error: "unavailable" });
        expect(String((refusedRecv.body as { message: string }).message)).toContain("waiting calls");
        expect(Number(refusedRecv.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        // A status waiting for a peer that has not joined would wait: refused too.
        const lonely = (await client.open({ node: 0 })).body;
        const refusedStatus = await client.call("GET", "/v1/status", {
          query: { code: lonely.code, wait: 25_000 },
          token: lonely.token,
          node: 0,
        });
        expect(refusedStatus.status).toBe(503);
        const stream = await fetch(`${client.nodeUrl(0)}/v1/stream?code=${two.code}`, {
          headers: { authorization: `Bearer ${two.a}`, "user-agent": "duet-test" },
        });
        expect(stream.status).toBe(503);
        expect(stream.headers.get("retry-after")).not.toBeNull();
        expect(await stream.json()).toMatchObject({ error: "unavailable" });
        expect(await sample(target(), "duet_waiters_refused_total")).toBeGreaterThanOrEqual(3);

        // A recv whose answer is there at once is served: only waiting is refused.
        expect((await client.send(three.code, three.a, "already here")).status).toBe(200);
        const answered = await client.recv(three.code, three.b, 25_000, { node: 0 });
        expect(answered.status).toBe(200);
        expect((answered.body as { messages: { text: string }[] }).messages.map((m) => m.text)).toEqual([
          "already here",
        ]);

        // Still ready: the node serves every call but a new wait, and readiness that any client
        // could flip by filling the cap would let strangers take it out of the load balancer.
        const ready = await client.call("GET", "/readyz", { node: 0 });
        expect(ready.status).toBe(200);
        expect(ready.body).toEqual({ ready: true });

        // The waiters it holds are never dropped for it: a send wakes one as usual.
        expect((await client.send(one.code, one.a, "wake")).status).toBe(200);
        const woken = await held[0]!;
        expect(woken.status).toBe(200);
        expect((woken.body as { messages: { text: string }[] }).messages.map((m) => m.text)).toEqual(["wake"]);

        // One held of two: a new waiter is admitted.
        await untilWaiting(target(), 1);
        held.push(client.recv(one.code, one.a, 25_000, { signal: abort.signal, node: 0 }));
        await untilWaiting(target(), 2);
      } finally {
        abort.abort();
        await Promise.allSettled(held);
      }
    });

    it("a held MCP selftest probe is a waiter: it counts against the cap, and past it the tool answers unavailable", async () => {
      const { client } = target();
      await untilWaiting(target(), 0);
      const abort = new AbortController();
      const probe = (name: string, signal?: AbortSignal) =>
        fetch(`${client.nodeUrl(0)}/mcp`, {
          method: "POST",
          signal,
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "tools/call",
            params: { name: "selftest", arguments: { probe: name, wait: 25_000 } },
          }),
        }).then((r) => r.text());
      const room = await client.pairedRoom();
      const held: Promise<unknown>[] = [
        client.recv(room.code, room.b, 25_000, { signal: abort.signal, node: 0 }),
        probe("held-probe-1", abort.signal),
      ];
      try {
        await untilWaiting(target(), 1);
        while ((await sample(target(), "duet_selftests_waiting")) !== 1) await new Promise((r) => setTimeout(r, 20));
        expect(await sample(target(), "duet_waiters_held")).toBe(CAP);
        const text = await probe("held-probe-2");
        const refused = JSON.parse(/^data: (.*)$/m.exec(text)?.[1] ?? text);
        expect(refused.result.isError).toBe(true);
        expect(JSON.parse(refused.result.content[0].text)).toMatchObject({ error: "unavailable" });
      } finally {
        abort.abort();
        await Promise.allSettled(held);
      }
    });

    it("waiters set up at the same moment cannot all pass the cap: of ten at once, two wait and eight are refused", async () => {
      const { client } = target();
      await untilWaiting(target(), 0);
      const rooms = await Promise.all(Array.from({ length: 10 }, () => client.pairedRoom()));
      const abort = new AbortController();
      let refused = 0;
      const calls = rooms.map((room) =>
        client.recv(room.code, room.b, 25_000, { signal: abort.signal, node: 0 }).then((r) => {
          if (r.status === 503) refused++;
          return r.status;
        }),
      );
      try {
        // Until every call is either refused or waiting on the node (its own count).
        while (refused + (await sample(target(), "duet_recv_waiting")) < 10)
          await new Promise((r) => setTimeout(r, 20));
        expect({ refused, waiting: await sample(target(), "duet_recv_waiting") }).toEqual({
          refused: 10 - CAP,
          waiting: CAP,
        });
      } finally {
        abort.abort();
        await Promise.allSettled(calls);
      }
    });
  },
  // Every call comes from one address here: no bound per address (the harness's default;
  // waiter-bounds.test.ts has it).
  { kinds: KINDS, env: { MAX_WAITERS: String(CAP), METRICS_CACHE_MS: "0" } },
);
