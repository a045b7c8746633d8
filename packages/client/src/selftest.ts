// The path self-test from the client's side (GET /v1/selftest, docs/protocol.md §11.8): a
// long-poll held for its whole wait, and the five-tick stream, run at once. From what
// arrives, and when, it advises the transport and the wait to use from here.
import { MAX_WAIT_MS, SELFTEST_STREAM_EVENTS, SELFTEST_TICKS, SelftestResponse } from "@duet/protocol";
import { DuetError } from "./errors.js";
import { eventData, eventStream } from "./stream.js";
import type { Transport } from "./transport.js";

/** A held call is answered within its wait plus this; beyond it the path dropped it silently. */
const ANSWER_MARGIN_MS = 10_000;
/** The self-test's stream sends its first byte at once and ends after five seconds. */
const STREAM_FIRST_BYTE_MS = 15_000;
/** Advised wait as a share of how long a cut long-poll lasted: room for a slower path on another day. */
const CUT_SHARE = 0.6;

export interface SelftestOptions {
  /** The long-poll's wait, 0..25000 ms. Default 25000. */
  waitMs?: number;
  signal?: AbortSignal;
}

export interface SelftestReport {
  baseUrl: string;
  longPoll: {
    /** The wait asked for. */
    waitMs: number;
    /** The answer came after the whole wait. */
    survived: boolean;
    /** How long the call lasted, as the client measured. */
    elapsedMs: number;
    /** What cut it, when it was cut (the error's code and message). */
    failure?: { code: string; message: string };
  };
  stream: {
    /** Ticks that arrived (5 when the stream went through). */
    ticks: number;
    /** From the request to the stream's first byte. */
    firstByteMs?: number;
    /** Between the first and the last tick's arrival, here. */
    arrivalSpreadMs?: number;
    /** Between the first and the last tick's sending, by the relay's clock. */
    sentSpreadMs?: number;
    /** The ticks arrived together rather than as they were sent: something buffers streams. */
    buffered: boolean;
    failure?: { code: string; message: string };
  };
  advice: {
    /** "stream" when events arrive as they are sent; else "long-poll". */
    transport: "stream" | "long-poll";
    /** The longest recv/status wait that survives this path (ms). */
    waitMs: number;
  };
}

const failureOf = (error: unknown) =>
  error instanceof DuetError
    ? { code: error.code, message: error.message }
    : { code: "unexpected", message: error instanceof Error ? error.message : String(error) };

/** A refusal that says the relay cannot run the test (it is not a duet relay, or rate limits us), not that the path cut it. */
const isRefusal = (error: unknown) =>
  error instanceof DuetError &&
  ["not_found", "method_not_allowed", "bad_request", "rate_limited", "forbidden", "aborted"].includes(error.code);

export async function runSelftest(
  transport: Transport,
  now: () => number,
  options: SelftestOptions = {},
): Promise<SelftestReport> {
  const waitMs = Math.min(Math.max(options.waitMs ?? MAX_WAIT_MS, 0), MAX_WAIT_MS);
  const [longPoll, stream] = await Promise.all([
    longPollTest(transport, now, waitMs, options.signal),
    streamTest(transport, now, options.signal),
  ]);
  const advisedWait = longPoll.survived
    ? waitMs
    : Math.min(waitMs, Math.max(0, Math.floor((longPoll.elapsedMs * CUT_SHARE) / 1000) * 1000));
  return {
    baseUrl: transport.baseUrl,
    longPoll,
    stream,
    advice: {
      transport: stream.failure === undefined && !stream.buffered ? "stream" : "long-poll",
      waitMs: advisedWait,
    },
  };
}

async function longPollTest(
  transport: Transport,
  now: () => number,
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<SelftestReport["longPoll"]> {
  const started = now();
  try {
    const answer = await transport.request("GET", "/v1/selftest", SelftestResponse, {
      query: { mode: "longpoll", wait: String(waitMs) },
      signal,
      timeoutMs: waitMs + ANSWER_MARGIN_MS,
    });
    // A path that answers early (a cache, a proxy making up its own 200) did not hold the wait.
    return { waitMs, survived: answer.waited_ms >= waitMs - 1, elapsedMs: now() - started };
  } catch (error) {
    if (isRefusal(error)) throw error;
    return { waitMs, survived: false, elapsedMs: now() - started, failure: failureOf(error) };
  }
}

async function streamTest(
  transport: Transport,
  now: () => number,
  signal: AbortSignal | undefined,
): Promise<SelftestReport["stream"]> {
  const started = now();
  let firstByteMs: number | undefined;
  const arrivals: number[] = [];
  const sent: number[] = [];
  const result = (failure?: unknown): SelftestReport["stream"] => {
    const spread = (times: number[]) => (times.length > 1 ? times[times.length - 1]! - times[0]! : undefined);
    const arrivalSpreadMs = spread(arrivals);
    const sentSpreadMs = spread(sent);
    // Sent over about four seconds: arriving within half of that is a lump, not a stream.
    const buffered = arrivalSpreadMs !== undefined && sentSpreadMs !== undefined && arrivalSpreadMs < sentSpreadMs / 2;
    return {
      ticks: arrivals.length,
      ...(firstByteMs !== undefined ? { firstByteMs } : {}),
      ...(arrivalSpreadMs !== undefined ? { arrivalSpreadMs } : {}),
      ...(sentSpreadMs !== undefined ? { sentSpreadMs } : {}),
      buffered,
      ...(failure !== undefined ? { failure: failureOf(failure) } : {}),
    };
  };
  const path = "/v1/selftest";
  try {
    for await (const item of eventStream(
      transport,
      path,
      { mode: "stream" },
      { signal, firstByteTimeoutMs: STREAM_FIRST_BYTE_MS },
    )) {
      if (item.kind === "open") {
        firstByteMs = now() - started;
      } else if (item.event === "tick") {
        const sentAt = SELFTEST_STREAM_EVENTS.tick.shape.sent_at_ms.safeParse(eventData(path, item).sent_at_ms);
        arrivals.push(now());
        if (sentAt.success) sent.push(sentAt.data);
      } else if (item.event === "end") {
        break;
      }
    }
  } catch (error) {
    if (isRefusal(error)) throw error;
    return result(error);
  }
  if (arrivals.length < SELFTEST_TICKS)
    return result(new DuetError("network", `The stream ended after ${arrivals.length} of ${SELFTEST_TICKS} ticks.`));
  return result();
}
