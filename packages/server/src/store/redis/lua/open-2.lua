-- open: creates a room with seat a taken.
-- KEYS[1] room hash, KEYS[2] tally hash of the room's slot
-- ARGV[1] token hash of seat a, ARGV[2] idle lifetime ms, ARGV[3] hard lifetime ms
-- Returns: ms until the room expires, or -409 when the code is already in use (mint another).
if redis.call('EXISTS', KEYS[1]) == 1 then return -409 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hard = now + tonumber(ARGV[3])
local expires_at = math.min(now + tonumber(ARGV[2]), hard)
redis.call('HSET', KEYS[1], 'ta', ARGV[1], 'hard', hard, 'seen_a', now, 'seq', 0, 'bytes', 0)
redis.call('PEXPIREAT', KEYS[1], expires_at)
redis.call('HINCRBY', KEYS[2], 'sessions', 1)
return expires_at - now
