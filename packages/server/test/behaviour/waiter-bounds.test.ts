// No stranger can take a node, or every pod, out of service (issue 36; docs/protocol.md §9,
// §10, §11.5, §11.8): one client address holds at most its share of a node's waiters
// (MAX_WAITERS_PER_CLIENT, by default an eighth of MAX_WAITERS), a seat at most
// MAX_WAITERS_PER_SEAT waiting recvs and statuses (one more answers the oldest), held
// self-tests count as waiters, and /readyz never depends on how many waiters a node holds.
// Addresses are X-Forwarded-For entries behind a trusted proxy (TRUST_PROXY=1), as the
// rate-limit tests simulate clients. Every step waits on the node's own counts (its
// /metrics), never on time. Calls that wait are pinned to node 0, whose bounds they fill.
// The bounds are the node's own (src/realtime/admission.ts, long-polls.ts): they run on
// NODE_LOCAL_TARGETS, not again on a Cluster, whose wake-ups the long-poll tests cover.
import { WAITERS_PER_SEAT } from "@duet/protocol";
import type { Reply } from "../support/http-client";
import { NODE_LOCAL_TARGETS, TALLY_CACHED_ENV, forEachTarget, type RelayTarget } from "../support/targets";

/** The node's cap; MAX_WAITERS_PER_CLIENT=auto makes an address's share an eighth of it. */
const CAP = 40;
const PER_CLIENT = CAP / 8;
const MCP_HOLD_MS = 1000;

const from = (address: string) => ({ "x-forwarded-for": address });

/** A sample of a node's /metrics (not cached: METRICS_CACHE_MS=0 in the tests). */
async function sample(target: RelayTarget, name: string, node = 0): Promise<number> {
  const { text } = await target.client.metrics(node);
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`no ${name} in /metrics`);
  return Number(line.split(" ")[1]);
}

/** Until a node's gauge reads `count` (an event: the waiters registered or ended). */
async function until(target: RelayTarget, name: string, count: number, node = 0): Promise<void> {
  while ((await sample(target, name, node)) !== count) await new Promise((r) => setTimeout(r, 20));
}

/** Every node's /readyz. */
async function readiness(target: RelayTarget): Promise<number[]> {
  const nodes = target.client.baseUrls.length;
  return Promise.all(
    Array.from({ length: nodes }, async (_, node) => (await target.client.call("GET", "/readyz", { node })).status),
  );
}

/** One JSON-RPC tools/call on node 0's /mcp, from `address`: the tool's structured answer or its error. */
async function mcpTool(target: RelayTarget, address: string, name: string, args: Record<string, unknown>) {
  const response = await fetch(`${target.client.nodeUrl(0)}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...from(address),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const text = await response.text();
  const data = /^data: (.*)$/m.exec(text)?.[1] ?? text;
  const result = JSON.parse(data).result as { isError?: boolean; content: { text: string }[]; structuredContent?: any };
  return result.isError ? { error: JSON.parse(result.content[0]!.text) } : { answer: result.structuredContent };
}

const messagesOf = (reply: Reply) => (reply.body as { messages: { text: string }[] }).messages.map((m) => m.text);

forEachTarget(
  (target) => {
    it("one address past its share gets 429 too_many_waiters; another address still waits and is answered, and every node stays ready", async () => {
      const { client } = target();
      const abort = new AbortController();
      const signal = abort.signal;
      const rooms = await Promise.all(Array.from({ length: PER_CLIENT + 3 }, () => client.pairedRoom()));
      const held: Promise<Reply>[] = [];
      try {
        // One waiting recv per room from one address: its share waits, the rest is refused.
        for (const room of rooms.slice(0, PER_CLIENT))
          held.push(client.recv(room.code, room.b, 25_000, { signal, node: 0, headers: from("203.0.113.7") }));
        await until(target(), "duet_waiters_held", PER_CLIENT);
        for (const room of rooms.slice(PER_CLIENT)) {
          const refused = await client.recv(room.code, room.b, 25_000, { node: 0, headers: from("203.0.113.7:4242") });
          expect({ status: refused.status, error: refused.body.error }).toEqual({
            status: 429,
            error: "too_many_waiters",
          });
          expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        }
        // A waiting status, a stream and a held self-test of that address: refused the same way.
        const extra = rooms[PER_CLIENT]!;
        const sent = await client.send(extra.code, extra.a, "here already");
        expect(sent.status).toBe(200);
        const status = await client.call("GET", "/v1/status", {
          query: { code: extra.code, wait: 25_000, until_read: sent.body.id },
          token: extra.a,
          node: 0,
          headers: from("203.0.113.7"),
        });
        expect(status.body.error).toBe("too_many_waiters");
        const stream = await fetch(`${client.nodeUrl(0)}/v1/stream?code=${extra.code}`, {
          headers: { authorization: `Bearer ${extra.a}`, "user-agent": "duet-test", ...from("203.0.113.7") },
        });
        expect([stream.status, ((await stream.json()) as { error: string }).error]).toEqual([429, "too_many_waiters"]);
        const selftest = await client.call("GET", "/v1/selftest", {
          query: { wait: 25_000 },
          node: 0,
          headers: from("203.0.113.7"),
        });
        expect(selftest.body.error).toBe("too_many_waiters");
        // Its calls that have their answer at once are still served.
        const atOnce = await client.recv(extra.code, extra.b, 25_000, { node: 0, headers: from("203.0.113.7") });
        expect(messagesOf(atOnce)).toEqual(["here already"]);

        // Another address waits on the same node, and a send wakes it.
        const other = await client.pairedRoom();
        const waiting = client.recv(other.code, other.b, 25_000, { signal, node: 0, headers: from("198.51.100.9") });
        await until(target(), "duet_waiters_held", PER_CLIENT + 1);
        expect(await readiness(target())).toEqual(target().client.baseUrls.map(() => 200));
        expect((await client.send(other.code, other.a, "for the other address")).status).toBe(200);
        const woken = await waiting;
        expect([woken.status, messagesOf(woken)]).toEqual([200, ["for the other address"]]);
      } finally {
        abort.abort();
        await Promise.allSettled(held);
      }
    });

    it("a node whose cap is full refuses new waiters 503 and stays ready: /readyz says whether it can serve, not how many wait", async () => {
      const { client } = target();
      await until(target(), "duet_waiters_held", 0);
      const abort = new AbortController();
      const signal = abort.signal;
      const held: Promise<unknown>[] = [];
      try {
        // CAP / PER_CLIENT addresses, each its share: held self-tests, the cheapest waiters.
        for (let a = 0; a < CAP / PER_CLIENT; a++)
          for (let i = 0; i < PER_CLIENT; i++)
            held.push(
              client.call("GET", "/v1/selftest", {
                query: { wait: 25_000 },
                signal,
                node: 0,
                headers: from(`192.0.2.${a + 1}`),
              }),
            );
        await until(target(), "duet_waiters_held", CAP);
        expect(await sample(target(), "duet_selftests_waiting")).toBe(CAP);
        const room = await client.pairedRoom();
        const refused = await client.recv(room.code, room.b, 25_000, { node: 0, headers: from("198.51.100.200") });
        expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 503, error: "unavailable" });
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        expect(await readiness(target())).toEqual(target().client.baseUrls.map(() => 200));
      } finally {
        abort.abort();
        await Promise.allSettled(held);
      }
    });

    it(`a seat holds ${WAITERS_PER_SEAT} waiting recvs; one more answers the oldest at once with an empty list, and the newest get the message`, async () => {
      const { client } = target();
      await until(target(), "duet_recv_waiting", 0);
      const room = await client.pairedRoom();
      const abort = new AbortController();
      const recvs: Promise<Reply>[] = [];
      let oldestAnswered = false;
      // Each seat's calls from an address of its own: the per-address share is not what is tested.
      const b = { signal: abort.signal, node: 0, headers: from("198.51.100.21") };
      try {
        // One after another, so that the node registers them in this order.
        for (let i = 0; i < WAITERS_PER_SEAT; i++) {
          const recv = client.recv(room.code, room.b, 25_000, b);
          if (i === 0) void recv.then(() => (oldestAnswered = true));
          recvs.push(recv);
          await until(target(), "duet_recv_waiting", i + 1);
        }
        // The peer's seat has its own: a room holds twice a seat's bound.
        const peer = client.recv(room.code, room.a, 25_000, { ...b, headers: from("198.51.100.22") });
        await until(target(), "duet_recv_waiting", WAITERS_PER_SEAT + 1);
        expect(oldestAnswered).toBe(false);

        recvs.push(client.recv(room.code, room.b, 25_000, b));
        const oldest = await recvs[0]!;
        expect([oldest.status, oldest.body]).toEqual([200, { messages: [] }]);
        // The newest waits in its place.
        await until(target(), "duet_recv_waiting", WAITERS_PER_SEAT + 1);
        expect((await client.send(room.code, room.a, "to every waiting recv")).status).toBe(200);
        for (const reply of await Promise.all(recvs.slice(1)))
          expect([reply.status, messagesOf(reply)]).toEqual([200, ["to every waiting recv"]]);
        abort.abort();
        await peer.catch(() => undefined);
      } finally {
        abort.abort();
        await Promise.allSettled(recvs);
      }
    });

    it("held self-tests are waiters: the REST long-poll and stream modes and the MCP probe count against the address's share; the MCP probe is held at most MCP_MAX_WAIT_MS", async () => {
      const { client } = target();
      await until(target(), "duet_waiters_held", 0);
      const abort = new AbortController();
      const signal = abort.signal;
      const address = "203.0.113.50";
      const held: Promise<unknown>[] = [];
      try {
        held.push(
          client.call("GET", "/v1/selftest", { query: { wait: 25_000 }, signal, node: 0, headers: from(address) }),
        );
        held.push(
          fetch(`${client.nodeUrl(0)}/v1/selftest?mode=stream`, { signal, headers: from(address) }).then((r) =>
            r.text(),
          ),
        );
        await until(target(), "duet_selftests_waiting", 2);
        expect(await sample(target(), "duet_waiters_held")).toBe(2);
        for (let i = 2; i < PER_CLIENT; i++)
          held.push(
            client.call("GET", "/v1/selftest", { query: { wait: 25_000 }, signal, node: 0, headers: from(address) }),
          );
        await until(target(), "duet_selftests_waiting", PER_CLIENT);
        // At its share: a recv that would wait, another self-test and an MCP probe are refused.
        const room = await client.pairedRoom();
        const recv = await client.recv(room.code, room.b, 25_000, { node: 0, headers: from(address) });
        expect(recv.body.error).toBe("too_many_waiters");
        const stream = await fetch(`${client.nodeUrl(0)}/v1/selftest?mode=stream`, { headers: from(address) });
        expect([stream.status, ((await stream.json()) as { error: string }).error]).toEqual([429, "too_many_waiters"]);
        const probe = await mcpTool(target(), address, "selftest", { probe: "refused-probe", wait: 25_000 });
        expect(probe.error).toMatchObject({ error: "too_many_waiters" });
        // Nothing was noted for the refused probe: once the address has room, it is held as new.
        abort.abort();
        await Promise.allSettled(held);
        await until(target(), "duet_waiters_held", 0);
        const capped = await mcpTool(target(), address, "selftest", { probe: "refused-probe", wait: 25_000 });
        expect(capped.answer).toMatchObject({ probe: "refused-probe", outcome: "delivered", wait_ms: MCP_HOLD_MS });
      } finally {
        abort.abort();
        await Promise.allSettled(held);
      }
    });
  },
  {
    env: {
      TRUST_PROXY: "1",
      MAX_WAITERS: String(CAP),
      // The default (the test harness turns it off: support/targets.ts).
      MAX_WAITERS_PER_CLIENT: "auto",
      MCP_MAX_WAIT_MS: String(MCP_HOLD_MS),
      ...TALLY_CACHED_ENV,
    },
    kinds: NODE_LOCAL_TARGETS,
  },
);
