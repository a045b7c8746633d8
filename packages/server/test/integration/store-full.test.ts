import { ERRORS } from "@duet/protocol";
import { ownRedis } from "../support/own-redis";

const own = ownRedis({ args: ["--maxmemory-policy", "noeviction"] });

const series = async (name: string) => {
  const { text } = await own.target.client.metrics();
  const escaped = name.replace(/[{}"]/g, "\\$&");
  return Number(new RegExp(`^${escaped} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
};

it("a send to a full Redis is a 503 that says the store is full, counted apart from unreachable", async () => {
  const { client } = own.target;
  const room = await client.pairedRoom();
  expect(await series("duet_store_full_total")).toBe(0);
  const unavailableBefore = await series('duet_errors_total{code="unavailable"}');

  // Any write now exceeds maxmemory: Redis answers OOM, and noeviction frees nothing.
  await own.admin.config("SET", "maxmemory", "1");
  try {
    const refused = await client.send(room.code, room.a, "does not fit");
    expect({ status: refused.status, body: refused.body }).toEqual({
      status: 503,
      body: {
        error: "unavailable",
        message: "The relay's store is full (Redis maxmemory); rooms that end free space. Retry later.",
      },
    });
    expect(refused.body.message).not.toBe(ERRORS.unavailable.message);
    expect(refused.headers.get("retry-after")).toBe("1");
    // Redis still answers: the node stays ready (an unreachable store would make it 503).
    expect((await fetch(`${own.target.nodes[0]!.url}/readyz`)).status).toBe(200);
  } finally {
    await own.admin.config("SET", "maxmemory", "0");
  }

  expect(await series("duet_store_full_total")).toBe(1);
  expect(await series('duet_errors_total{code="unavailable"}')).toBe(unavailableBefore + 1);
  // With room again, the same send goes through.
  expect((await client.send(room.code, room.a, "fits now")).status).toBe(200);
  expect(await series("duet_store_full_total")).toBe(1);
});
