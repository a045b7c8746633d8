-- join: claims seat b and wakes the opener's waiting status.
-- KEYS[1..7] the room's keys (see includes/seat.lua), KEYS[8] tally hash of the room's tag
-- ARGV[1] token hash of seat b, ARGV[2] idle lifetime ms, ARGV[3] wake channel
-- Returns: named fields {'expires_in', ms until the room expires, 'e2e', 0/1}, or GONE or
-- FULL (includes/refusals.lua).
--!include seat.lua
local tokens = redis.call('HMGET', KEYS[1], 'ta', 'tb', 'e2e')
if not tokens[1] then return GONE end
if tokens[2] then return FULL end
local now = now_ms()
redis.call('HSET', KEYS[1], 'tb', ARGV[1])
-- Only on a record open-8.lua wrote (with keep 0 it writes none).
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('HSET', KEYS[7], 'tb', ARGV[1]) end
local expires_at = touch('b', now, tonumber(ARGV[2]))
expire_room(expires_at)
redis.call('HINCRBY', KEYS[8], 'paired', 1)
redis.call('SPUBLISH', ARGV[3], 'joined')
return {'expires_in', expires_at - now, 'e2e', flag(tokens[3])}
