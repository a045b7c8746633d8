-- ack: deletes messages addressed to the caller (the read receipt), and tells the sender.
-- KEYS[1..7] the room's keys (see includes/seat.lua)
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] wake channel, ARGV[4..] message ids
-- Returns: how many messages were deleted (unknown, foreign or repeated ids are ignored),
-- or GONE / WRONG_TOKEN. When it deleted any, it publishes 'read:<sender's seat>:<id>,...'
-- (the deleted ids, oldest first) on the wake channel: the sender's waiting status and
-- streams learn it on any node. An ack that deletes nothing publishes nothing.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
local now = now_ms()
local expires_at = touch(seat, now, tonumber(ARGV[2]))
local inbox = inbox_of(seat)
local read = {}
for i = 4, #ARGV do
  if redis.call('LREM', inbox, 1, ARGV[i]) == 1 then
    local size = redis.call('HSTRLEN', KEYS[4], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
    redis.call('HINCRBY', KEYS[1], 'bytes', -size)
    read[#read + 1] = ARGV[i]
  end
end
expire_room(expires_at)
if #read > 0 then
  table.sort(read, function(x, y) return tonumber(x) < tonumber(y) end)
  redis.call('SPUBLISH', ARGV[3], 'read:' .. peer_of(seat) .. ':' .. table.concat(read, ','))
end
return #read
