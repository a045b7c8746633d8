// What a scripted relay answers in the SDK's unit and wire tests: a JSON Response, and the
// status of seat a in a room both seats joined.

/** A JSON answer with `status`. */
export const json = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

/** Seat a's status in a joined room: `unread` its sent messages the peer has not read (pending_out their number). */
export const statusBody = (unread: string[], pendingIn = 0) => ({
  seat: "a",
  members: ["a", "b"],
  expires_in: 1700,
  peer_joined: true,
  peer_active: true,
  pending_in: pendingIn,
  pending_out: unread.length,
  unread,
});
