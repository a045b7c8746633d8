-- close: ends the room for both seats, records how, and wakes every waiting call.
-- KEYS[1..7] the room's keys (see includes/seat.lua), KEYS[8] tally hash of the room's tag
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] '1' to abandon unread messages,
-- ARGV[4] wake channel
-- Returns: 0 closed, UNREAD (messages are pending and force is off), GONE, WRONG_TOKEN
-- (includes/refusals.lua).
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
local left_a = redis.call('LLEN', KEYS[2])
local left_b = redis.call('LLEN', KEYS[3])
-- Without force a close is refused while any message is unacked, in either direction; with
-- force it ends the room as force_closed (docs/protocol.md §5.3, §16).
if ARGV[3] ~= '1' and left_a + left_b > 0 then
  expire_room(touch(seat, now_ms(), tonumber(ARGV[2])))
  return UNREAD
end
-- The ending record keeps how the room ended for 'keep' ms (a relay with keep 0 writes none
-- at open).
local keep = tonumber(redis.call('HGET', KEYS[7], 'keep')) or 0
if keep > 0 then
  local why = 'closed'
  if left_a + left_b > 0 then why = 'force_closed' end
  redis.call('HSET', KEYS[7], 'why', why, 'by', seat, 'at', now_ms(), 'left_a', left_a, 'left_b', left_b)
  redis.call('PEXPIRE', KEYS[7], keep)
else
  redis.call('DEL', KEYS[7])
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[6], room_code())
redis.call('HINCRBY', KEYS[8], 'closed', 1)
redis.call('SPUBLISH', ARGV[4], 'closed')
return 0
