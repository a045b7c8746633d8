// Prometheus metrics (prom-client), one registry per app so that several apps in one
// process (the tests' multi-node harness) never share counters. Labels carry route
// patterns, statuses and error codes only: never a room code, a token or a text.
//
// Every labelled counter exists at zero from start-up for each value the relay knows (each
// error code, each route with the statuses it can answer, each Redis connection): a series
// that appeared at its first increment would make Prometheus's first sample 1 already, and
// rate()/increase() would never show that first event.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { ERROR_CODES, type ErrorCode } from "@duet/protocol";
import type { ApiError } from "./errors.js";
import type { StoreTally } from "./store/room-store.js";
import type { WaiterAdmission } from "./realtime/admission.js";

/** A route the app serves: its pattern, method and the statuses it can answer. */
export interface KnownRoute {
  route: string;
  method: string;
  statuses: readonly number[];
}

/**
 * prom-client's defaults that promtool rejects: gauges named like counters (`_total`). Their
 * unsuffixed siblings (`duet_nodejs_active_handles` by type, ...) stay; sum them for a total.
 */
const MISNAMED_DEFAULTS = [
  "duet_nodejs_active_handles_total",
  "duet_nodejs_active_requests_total",
  "duet_nodejs_active_resources_total",
];

export class RelayMetrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: "duet_http_requests_total",
    help: "HTTP requests answered, by route pattern, method and status.",
    labelNames: ["route", "method", "status"] as const,
    registers: [this.registry],
  });

  readonly requestSeconds = new Histogram({
    name: "duet_http_request_duration_seconds",
    help: "Time to answer a request (a long-poll recv includes its wait).",
    labelNames: ["route", "method", "status"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 26],
    registers: [this.registry],
  });

  readonly refusals = new Counter({
    name: "duet_errors_total",
    help: "Error answers by error code (mailbox_full, rate_limited, unavailable, ...).",
    labelNames: ["code"] as const,
    registers: [this.registry],
  });

  readonly storeFull = new Counter({
    name: "duet_store_full_total",
    help: "503 unavailable answers because Redis is full (an OOM reply under noeviction), not unreachable.",
    registers: [this.registry],
  });

  readonly roomsOpened = new Counter({
    name: "duet_rooms_opened_total",
    help: "Rooms opened through this node.",
    registers: [this.registry],
  });
  readonly roomsJoined = new Counter({
    name: "duet_rooms_joined_total",
    help: "Second seats claimed through this node.",
    registers: [this.registry],
  });
  readonly roomsClosed = new Counter({
    name: "duet_rooms_closed_total",
    help: "Rooms closed through this node.",
    registers: [this.registry],
  });
  readonly messages = new Counter({
    name: "duet_messages_accepted_total",
    help: "Messages accepted through this node (replays not counted).",
    registers: [this.registry],
  });
  readonly bytes = new Counter({
    name: "duet_message_bytes_accepted_total",
    help: "UTF-8 bytes of messages accepted through this node.",
    registers: [this.registry],
  });

  readonly redisErrors = new Counter({
    name: "duet_redis_connection_errors_total",
    help: "Errors reported by this node's Redis connections.",
    labelNames: ["connection"] as const,
    registers: [this.registry],
  });

  readonly redisReconnects = new Counter({
    name: "duet_redis_reconnects_total",
    help: "Times a Redis connection of this node became ready again after losing its link.",
    labelNames: ["connection"] as const,
    registers: [this.registry],
  });

  constructor(options: {
    waitingRecvs: () => number;
    openStreams?: () => number;
    /** Held self-tests (GET /v1/selftest with a wait, its stream mode, the MCP probe). */
    selftests?: () => number;
    /** The node's waiter cap (realtime/admission.ts). */
    admission?: WaiterAdmission;
    tally: () => Promise<StoreTally>;
    processMetrics?: boolean;
  }) {
    new Gauge({
      name: "duet_recv_waiting",
      help: "Long-poll recvs waiting on this node now.",
      registers: [this.registry],
      collect() {
        this.set(options.waitingRecvs());
      },
    });
    new Gauge({
      name: "duet_streams_open",
      help: "Push streams (GET /v1/stream) open on this node now.",
      registers: [this.registry],
      collect() {
        this.set(options.openStreams?.() ?? 0);
      },
    });
    new Gauge({
      name: "duet_selftests_waiting",
      help: "Self-tests held on this node now (GET /v1/selftest with a wait or mode=stream, the MCP selftest tool).",
      registers: [this.registry],
      collect() {
        this.set(options.selftests?.() ?? 0);
      },
    });
    const admission = options.admission;
    new Gauge({
      name: "duet_waiters_held",
      help: "Every waiting call this node holds now, counted against duet_waiters_max: recvs, statuses, streams and self-tests (and those being set up).",
      registers: [this.registry],
      collect() {
        this.set(admission?.held ?? 0);
      },
    });
    new Gauge({
      name: "duet_waiters_max",
      help: "The most waiting calls (recvs, statuses, streams, self-tests) this node holds (MAX_WAITERS); -1: no cap.",
      registers: [this.registry],
      collect() {
        this.set(admission?.max ?? -1);
      },
    });
    new Counter({
      name: "duet_waiters_refused_total",
      help: "Waiting calls refused 503 because this node held duet_waiters_max of them.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(admission?.refused ?? 0);
      },
    });
    // Whole-relay figures from the store (the same on every node; sum nothing across nodes).
    const fromTally = (name: string, help: string, pick: (tally: StoreTally) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          // With the store unreachable the gauge keeps its last value: /metrics must still
          // answer, it is how an operator sees the outage.
          const tally = await options.tally().catch(() => undefined);
          if (tally) this.set(pick(tally));
        },
      });
    fromTally("duet_store_rooms_open", "Rooms open right now, relay-wide.", (t) => t.roomsOpen);
    fromTally(
      "duet_store_rooms_expired",
      "Rooms that ended by idle timeout or hard cap, relay-wide, since the store was created.",
      (t) => Math.max(0, t.sessions - t.closed - t.roomsOpen),
    );
    fromTally("duet_store_messages", "Messages accepted, relay-wide, since the store was created.", (t) => t.messages);
    if (options.processMetrics !== false) {
      collectDefaultMetrics({ register: this.registry, prefix: "duet_" });
      for (const name of MISNAMED_DEFAULTS) this.registry.removeSingleMetric(name);
    }
    for (const code of ERROR_CODES) this.refusals.inc({ code }, 0);
  }

  /** Request counters at zero for every route and status it can answer; answer times for its 200s. */
  startRoutesAtZero(routes: readonly KnownRoute[]): void {
    for (const { route, method, statuses } of routes) {
      for (const status of statuses) this.requests.inc({ route, method, status: String(status) }, 0);
      if (statuses.includes(200)) this.requestSeconds.zero({ route, method, status: "200" });
    }
  }

  /** A Redis connection's error and reconnect counters, at zero until something happens. */
  watchConnection(connection: string): void {
    this.redisErrors.inc({ connection }, 0);
    this.redisReconnects.inc({ connection }, 0);
  }

  countError(code: ErrorCode): void {
    this.refusals.inc({ code });
  }

  /** An error answer: its code, and a full store apart from an unreachable one. */
  countFailure(failure: ApiError): void {
    this.countError(failure.code);
    if (failure.storeFull) this.storeFull.inc();
  }
}
