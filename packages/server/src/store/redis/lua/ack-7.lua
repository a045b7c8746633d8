-- ack: deletes messages addressed to the caller (the delivery receipt).
-- KEYS[1..7] the room's keys (see includes/seat.lua)
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3..] message ids
-- Returns: how many messages were deleted (unknown, foreign or repeated ids are ignored),
-- or GONE / WRONG_TOKEN.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
local now = now_ms()
local expires_at = touch(seat, now, tonumber(ARGV[2]))
local inbox = inbox_of(seat)
local acked = 0
for i = 3, #ARGV do
  if redis.call('LREM', inbox, 1, ARGV[i]) == 1 then
    local size = redis.call('HSTRLEN', KEYS[4], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
    redis.call('HINCRBY', KEYS[1], 'bytes', -size)
    acked = acked + 1
  end
end
expire_room(expires_at)
return acked
