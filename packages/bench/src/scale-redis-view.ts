// The scale run's view of its Redis (src/scale.ts): memory, CPU, commands and round trips
// from INFO, summed over the servers (one, or a Cluster's masters).
import { Redis } from "ioredis";

export interface RedisView {
  clients: Redis[];
  info(): Promise<{ usedMemory: number; rss: number; cpuSeconds: number; commands: number; roundTrips: number }>;
}

export function redisView(ports: number[]): RedisView {
  const clients = ports.map(
    (port) => new Redis({ port, host: "127.0.0.1", connectionName: "bench", maxRetriesPerRequest: 0 }),
  );
  const field = (info: string, name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(info)?.[1] ?? 0);
  return {
    clients,
    info: async () => {
      const total = { usedMemory: 0, rss: 0, cpuSeconds: 0, commands: 0, roundTrips: 0 };
      for (const client of clients) {
        const info = await client.info("all");
        total.usedMemory += field(info, "used_memory");
        total.rss += field(info, "used_memory_rss");
        total.cpuSeconds += field(info, "used_cpu_sys") + field(info, "used_cpu_user");
        total.commands += field(info, "total_commands_processed");
        // Round trips: the commands clients send themselves (the rest ran inside scripts).
        for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
          if (ROUND_TRIPS.has(match[1]!)) total.roundTrips += Number(match[2]);
      }
      return total;
    },
  };
}

const ROUND_TRIPS = new Set(["evalsha", "eval", "ssubscribe", "sunsubscribe", "subscribe", "unsubscribe", "ping"]);
