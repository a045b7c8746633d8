-- status: the room as the caller's seat sees it (whether the peer is active is decided by
-- the store, from peer_seen and now: room-rules.ts isActive).
-- KEYS[1..7] the room's keys (see includes/seat.lua)
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] '1' counts as activity, '0' is a
-- re-read by a waiting status (which must not keep an idle room alive)
-- Returns: named fields {'seat', seat, 'expires_in', ms, 'peer_joined', 0/1, 'peer_seen', ms
-- of the peer's last call or '', 'now', ms, 'pending_in', n, 'unread', {ids of the caller's
-- messages the peer has not acked, oldest first}, 'e2e', 0/1},
-- or GONE / WRONG_TOKEN.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
local now = now_ms()
local expires_in = read_expiry(seat, now, tonumber(ARGV[2]), ARGV[3])
local peer = peer_of(seat)
local fields = redis.call('HMGET', KEYS[1], 'tb', 'seen_' .. peer, 'e2e')
return {
  'seat', seat,
  'expires_in', expires_in,
  'peer_joined', flag(fields[1]),
  'peer_seen', fields[2] or '',
  'now', now,
  'pending_in', redis.call('LLEN', inbox_of(seat)),
  'unread', redis.call('LRANGE', inbox_of(peer), 0, -1),
  'e2e', flag(fields[3]),
}
