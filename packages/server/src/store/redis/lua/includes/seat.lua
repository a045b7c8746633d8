-- Shared by every script that acts on a room. Expects the room's keys in this order:
-- KEYS[1] room hash, KEYS[2] inbox of a, KEYS[3] inbox of b, KEYS[4] bodies hash,
-- KEYS[5] idempotency hash, KEYS[6] live-rooms sorted set of the room's tag (code -> expiry),
-- KEYS[7] ending record (seat token hashes 'ta' 'tb', 'hard' cap, 'keep' ms; after a close
-- also 'why' 'by' 'at' 'left_a' 'left_b'), which outlives the room by 'keep' ms: see ending-1.lua.
--!include refusals.lua

-- Redis server time, in microseconds and milliseconds: every node of the relay sees the same
-- clock. Microseconds since 1970 stay below 2^53, so Lua's doubles hold them exactly.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- A whole number as decimal digits (tostring would write 1.7e+15 past 14 digits).
local function digits(n)
  return string.format('%.0f', n)
end

-- The caller's seat for a token hash, or nil and a status code.
local function seat_of(token_hash)
  local tokens = redis.call('HMGET', KEYS[1], 'ta', 'tb')
  if not tokens[1] then return nil, GONE end
  if tokens[1] == token_hash then return 'a' end
  if tokens[2] == token_hash then return 'b' end
  return nil, WRONG_TOKEN
end

local function inbox_of(seat)
  if seat == 'a' then return KEYS[2] end
  return KEYS[3]
end

-- 1 when a field is present (HMGET's nil is false), else 0: a flag in a script's reply.
local function flag(value)
  if value then return 1 end
  return 0
end

local function peer_of(seat)
  if seat == 'a' then return 'b' end
  return 'a'
end

-- Activity: records the seat as seen and moves the idle deadline, never past the hard cap.
-- Returns the new expiry time; expire_room applies it once the script's writes are done.
local function touch(seat, now, idle_ms)
  local hard = tonumber(redis.call('HGET', KEYS[1], 'hard'))
  redis.call('HSET', KEYS[1], 'seen_' .. seat, now)
  return math.min(now + idle_ms, hard)
end

-- The room's code, from its hash's name ("<prefix>{tag}:<code>:room").
local function room_code()
  return string.match(KEYS[1], ':([^:]+):room$')
end

-- Every key of the room dies at the same instant (a list emptied and refilled loses its TTL,
-- so this runs after the writes). The live set records the same expiry, so that "rooms open
-- now" is a count of scores in the future.
-- The ending record follows 'keep' ms later: expiry is silent in Redis, so the record's own
-- expiry time, minus 'keep', is when the room expired (ending-1.lua reads it back). A room
-- opened with keep 0 has none: PEXPIREAT on a missing key does nothing.
local function expire_room(expires_at)
  for i = 1, 5 do redis.call('PEXPIREAT', KEYS[i], expires_at) end
  redis.call('ZADD', KEYS[6], expires_at, room_code())
  local keep = tonumber(redis.call('HGET', KEYS[7], 'keep')) or 0
  redis.call('PEXPIREAT', KEYS[7], expires_at + keep)
end

-- A read that may count as activity: with counts '1' it touches the seat and moves the
-- room's expiry; with '0' (a waiting call re-reading) it leaves both alone, so a waiter never
-- keeps an idle room alive. Returns ms until the room expires.
local function read_expiry(seat, now, idle_ms, counts)
  if counts == '1' then
    local expires_at = touch(seat, now, idle_ms)
    expire_room(expires_at)
    return expires_at - now
  end
  return redis.call('PTTL', KEYS[1])
end
