-- open: creates a room with seat a taken, and its ending record. 'born' (microseconds, Redis
-- time) is what send-8.lua mints message ids from.
-- KEYS[1..7] the room's keys (see includes/seat.lua), KEYS[8] tally hash of the room's tag
-- ARGV[1] token hash of seat a, ARGV[2] idle lifetime ms, ARGV[3] hard lifetime ms,
-- ARGV[4] ms the ending record outlives the room,
-- ARGV[5] '1' for an end-to-end encrypted room (field e2e; sends must then be envelopes)
-- Returns: ms until the room expires, or CODE_IN_USE when the code is in use or its room
-- ended less than ARGV[4] ms ago (mint another: an ended room's code is never reopened).
--!include seat.lua
if redis.call('EXISTS', KEYS[1], KEYS[7]) > 0 then return CODE_IN_USE end
local born = now_us()
local now = math.floor(born / 1000)
local hard = now + tonumber(ARGV[3])
local expires_at = math.min(now + tonumber(ARGV[2]), hard)
redis.call('HSET', KEYS[1], 'ta', ARGV[1], 'hard', hard, 'seen_a', now, 'seq', 0, 'born', digits(born), 'bytes', 0)
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'e2e', 1) end
if tonumber(ARGV[4]) > 0 then redis.call('HSET', KEYS[7], 'ta', ARGV[1], 'hard', hard, 'keep', ARGV[4]) end
-- Rooms of this tag that have expired leave the live set here, a few at a time.
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
expire_room(expires_at)
redis.call('HINCRBY', KEYS[8], 'sessions', 1)
return expires_at - now
