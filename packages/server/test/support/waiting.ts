// Waiting for an event in a behaviour test: a condition polled until it holds, with a guard
// against a hang (never a bound the test measures), and the gauges it polls.
import type { TestClient } from "./http-client";

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `check` holds (polled every 25 ms); throws after `timeoutMs`, naming `what`. */
export async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 10_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await check()); await sleep(25)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
  }
}

/** Waiting recvs and status waits of one node, from its /metrics. */
export async function waitingOn(client: TestClient, node: number): Promise<number> {
  const { text } = await client.metrics(node);
  return Number(/^duet_recv_waiting (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

/**
 * Retries a call as a client does (through a failover, its 503s) until it answers 2xx; the
 * deadline guards a hang, it measures nothing. The last answer when it never does.
 */
export async function untilOk<T extends { status: number }>(call: () => Promise<T>, withinMs = 120_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const reply = await call();
    if (reply.status < 300 || Date.now() > deadline) return reply;
    await sleep(100);
  }
}
