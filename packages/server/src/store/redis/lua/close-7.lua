-- close: ends the room for both seats and wakes every waiting recv.
-- KEYS[1..6] the room's keys (see includes/seat.lua), KEYS[7] tally hash of the room's tag
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] '1' to abandon unread messages,
-- ARGV[4] wake channel
-- Returns: 0 closed, -409 unacked messages exist and force is off, -404 / -401.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
if ARGV[3] ~= '1' and redis.call('LLEN', KEYS[2]) + redis.call('LLEN', KEYS[3]) > 0 then
  expire_room(touch(seat, now_ms(), tonumber(ARGV[2])))
  return -409
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[6], room_code())
redis.call('HINCRBY', KEYS[7], 'closed', 1)
redis.call('SPUBLISH', ARGV[4], 'closed')
return 0
