-- join: claims seat b.
-- KEYS[1..6] the room's keys (see includes/seat.lua), KEYS[7] tally hash of the room's tag
-- ARGV[1] token hash of seat b, ARGV[2] idle lifetime ms
-- Returns: {ms until the room expires, 1 if end-to-end encrypted else 0}, -404 no such room,
-- -409 both seats taken.
--!include seat.lua
local tokens = redis.call('HMGET', KEYS[1], 'ta', 'tb', 'e2e')
if not tokens[1] then return -404 end
if tokens[2] then return -409 end
local now = now_ms()
redis.call('HSET', KEYS[1], 'tb', ARGV[1])
local expires_at = touch('b', now, tonumber(ARGV[2]))
expire_room(expires_at)
redis.call('HINCRBY', KEYS[7], 'paired', 1)
local e2e = 0
if tokens[3] then e2e = 1 end
return {expires_at - now, e2e}
