// One client process of the scale run (src/scale.ts): it holds its share of the seats, each
// on a socket of its own (`GET /v1/stream` held open, or `GET /v1/recv?wait=25000` looped on
// a keep-alive connection), sends the message load for the rooms it was given, times each
// message from its send to its event (send and receive may be in different processes: the
// times are the machine's clock, `performance.timeOrigin + performance.now()`), and acks
// what it receives. It talks to the orchestrator over IPC only.
import type { ClientRequest, ClientStatus, LoadReport, ScaleSeat } from "./scale-messages.js";
import { counts, now, pool, pools, run, status } from "./scale-client-state.js";
import { RelayClient } from "./client.js";
import { SeatConn } from "./seat-conn.js";
import { sleep } from "./stats.js";

const send = (message: unknown) => process.send?.(message);
const conns: SeatConn[] = [];

async function openRooms(count: number): Promise<void> {
  const clients = run.nodeUrls.map((url) => new RelayClient(url, 16));
  const rooms: [string, string, string][] = [];
  let next = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: Math.min(16 * clients.length, count) }, async (_, worker) => {
      const client = clients[worker % clients.length]!;
      while (next < count) {
        next++;
        for (let attempt = 0; ; attempt++) {
          try {
            const [a, b] = await client.room();
            rooms.push([a.code, a.token, b.token]);
            break;
          } catch (error) {
            errors++;
            if (attempt >= 5) throw error;
            await sleep(200);
          }
        }
      }
    }),
  );
  await Promise.all(clients.map((c) => c.close()));
  send({ type: "rooms", rooms, errors });
}

async function connectAll(concurrency: number): Promise<void> {
  const started = performance.now();
  for (const seat of run.seats) {
    const url = new URL(run.nodeUrls[seat.node]!);
    conns.push(new SeatConn(seat, url.hostname, Number(url.port)));
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, conns.length) }, async () => {
      while (next < conns.length) await conns[next++]!.start();
    }),
  );
  status.connectedMs = performance.now() - started;
  send({ type: "connected", status: snapshot() });
}

async function runLoad(rooms: number[], seconds: number, intervalMs: number): Promise<void> {
  const byRoom = new Map<number, ScaleSeat>();
  for (const seat of run.seats) if (!byRoom.has(seat.room)) byRoom.set(seat.room, seat);
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    rooms.map(async (room) => {
      const seat = byRoom.get(room)!;
      // Each room starts at its own moment within the first interval, then sends on its beat.
      await sleep(Math.random() * intervalMs);
      for (let seq = 0; performance.now() < end; seq++) {
        const beat = performance.now();
        try {
          await pool(seat.node).send(seat, `L ${room} ${seq} ${now()}`);
          counts.sent++;
        } catch (error) {
          counts.sendErrors++;
          if (status.errorSamples.length < 10) status.errorSamples.push(`send: ${(error as Error).message}`);
        }
        await sleep(Math.max(0, intervalMs - (performance.now() - beat)));
      }
    }),
  );
  send({ type: "loaded", sent: counts.sent, sendErrors: counts.sendErrors });
}

function snapshot(): ClientStatus {
  return { ...status, errorSamples: [...status.errorSamples], rssMb: process.memoryUsage().rss / 2 ** 20 };
}

async function stop(): Promise<void> {
  run.stopping = true;
  for (const conn of conns) conn.close();
  await Promise.allSettled([...pools.values()].map((p) => p.close()));
  process.exit(0);
}

process.on("message", (message: ClientRequest) => {
  switch (message.type) {
    case "rooms":
      run.nodeUrls = message.nodeUrls;
      void openRooms(message.count).catch((error: Error) => send({ type: "failed", error: error.message }));
      break;
    case "seats":
      run.mode = message.mode;
      run.nodeUrls = message.nodeUrls;
      run.localAddress = message.localAddress;
      run.seats = message.seats;
      send({ type: "seated" });
      break;
    case "connect":
      void connectAll(message.concurrency);
      break;
    case "status":
      send({ type: "status", status: snapshot() });
      break;
    case "load":
      void runLoad(message.rooms, message.seconds, message.intervalMs);
      break;
    case "report": {
      const report: LoadReport = {
        sent: counts.sent,
        sendErrors: counts.sendErrors,
        latencies: counts.latencies,
        received: counts.received,
        duplicates: counts.duplicates,
        acked: counts.acked,
        ackErrors: counts.ackErrors,
        status: snapshot(),
      };
      send({ type: "report", report });
      break;
    }
    case "stop":
      void stop();
      break;
  }
});
// The orchestrator going away ends this process too: nothing is left running.
process.on("disconnect", () => void stop());
send({ type: "ready" });
