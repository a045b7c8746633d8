-- open: creates a room with seat a taken.
-- KEYS[1..6] the room's keys (see includes/seat.lua), KEYS[7] tally hash of the room's tag
-- ARGV[1] token hash of seat a, ARGV[2] idle lifetime ms, ARGV[3] hard lifetime ms,
-- ARGV[4] '1' for an end-to-end encrypted room (field e2e; sends must then be envelopes)
-- Returns: ms until the room expires, or -409 when the code is already in use (mint another).
--!include seat.lua
if redis.call('EXISTS', KEYS[1]) == 1 then return -409 end
local now = now_ms()
local hard = now + tonumber(ARGV[3])
local expires_at = math.min(now + tonumber(ARGV[2]), hard)
redis.call('HSET', KEYS[1], 'ta', ARGV[1], 'hard', hard, 'seen_a', now, 'seq', 0, 'bytes', 0)
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'e2e', 1) end
-- Rooms of this tag that have expired leave the live set here, a few at a time.
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
expire_room(expires_at)
redis.call('HINCRBY', KEYS[7], 'sessions', 1)
return expires_at - now
