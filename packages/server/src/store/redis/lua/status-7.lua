-- status: the room as the caller's seat sees it.
-- KEYS[1..7] the room's keys (see includes/seat.lua)
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] peer-active window ms,
-- ARGV[4] '1' counts as activity, '0' is a re-read by a waiting status (which must not keep
-- an idle room alive)
-- Returns: {seat, ms until expiry, peer joined 0/1, peer active 0/1, pending in, pending out,
-- end-to-end encrypted 0/1},
-- or {GONE} / {WRONG_TOKEN}.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return {failure} end
local now = now_ms()
local expires_in = read_expiry(seat, now, tonumber(ARGV[2]), ARGV[4])
local peer = peer_of(seat)
local fields = redis.call('HMGET', KEYS[1], 'tb', 'seen_' .. peer, 'e2e')
local peer_joined = 0
if fields[1] then peer_joined = 1 end
local peer_active = 0
if fields[2] and now - tonumber(fields[2]) < tonumber(ARGV[3]) then peer_active = 1 end
local e2e = 0
if fields[3] then e2e = 1 end
return {seat, expires_in, peer_joined, peer_active, redis.call('LLEN', inbox_of(seat)), redis.call('LLEN', inbox_of(peer)), e2e}
