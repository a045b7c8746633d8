-- claim: counts a room an address opens against its budget of live rooms. Its own key and
-- its own script: the address's set lives in no room's slot, so the open script cannot
-- touch it (scripted-store.ts runs this just before open-8.lua, and again to drop a code).
-- KEYS[1] the address's rooms (sorted set: code -> ms when the room's hard cap ends it)
-- ARGV[1] the code to add ('' for none), ARGV[2] the hard lifetime in ms,
-- ARGV[3] the most live rooms the address may hold, ARGV[4..] codes to drop (rooms gone)
-- Returns: {0} claimed (or only dropped), or {TOO_MANY_ROOMS, ms until the earliest room
-- reaches its hard cap}. Rooms past their hard cap leave the set here; rooms closed or
-- idle-expired before it stay until the caller finds them gone and drops them.
--!include refusals.lua
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 4, #ARGV do redis.call('ZREM', KEYS[1], ARGV[i]) end
if ARGV[1] == '' then return {0} end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {TOO_MANY_ROOMS, tonumber(first[2]) - now}
end
local deadline = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], deadline, ARGV[1])
-- Every later room ends later: the set can go when its newest room's hard cap has passed.
redis.call('PEXPIREAT', KEYS[1], deadline)
return {0}
