-- recv: reads the caller's pending messages, oldest first, without consuming them.
-- KEYS[1..7] the room's keys (see includes/seat.lua)
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] '1' counts as activity, '0' is a
-- re-read by a waiting recv (which must not keep an idle room alive)
-- Returns: named fields {'seat', seat, 'expires_in', ms, 'messages', {id1, text1, id2, text2, ...}},
-- or GONE / WRONG_TOKEN.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
local now = now_ms()
local expires_in = read_expiry(seat, now, tonumber(ARGV[2]), ARGV[3])
local messages = {}
local ids = redis.call('LRANGE', inbox_of(seat), 0, -1)
if #ids > 0 then
  local texts = redis.call('HMGET', KEYS[4], unpack(ids))
  for i = 1, #ids do
    messages[#messages + 1] = ids[i]
    messages[#messages + 1] = texts[i]
  end
end
return {'seat', seat, 'expires_in', expires_in, 'messages', messages}
