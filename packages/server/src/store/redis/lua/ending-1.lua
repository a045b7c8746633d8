-- ending: how a gone room ended, for one of its seats (the store asks after GONE).
-- KEYS[1] the room's ending record (see includes/seat.lua)
-- ARGV[1] token hash
-- Returns: named fields {'seat', the token's seat, 'why', how a close ended it or '' when it
-- expired, 'at', ms timestamp of the end, 'by', closing seat or '', 'left_a', n, 'left_b', n,
-- 'hard', ms of its hard cap} (the store tells idle from hard cap: room-rules.ts
-- expiryReason); or GONE when there is no record (never existed, or ended more than 'keep'
-- ms ago), the token holds no seat of it (a stranger learns nothing), or the room is gone
-- without a recorded close before its expiry (the relay does not know how it ended).
--!include refusals.lua
local f = redis.call('HMGET', KEYS[1], 'ta', 'tb', 'why', 'by', 'at', 'left_a', 'left_b', 'hard', 'keep')
local seat
if f[1] and f[1] == ARGV[1] then seat = 'a' elseif f[2] and f[2] == ARGV[1] then seat = 'b' end
if not seat then return GONE end
if f[3] then
  return {'seat', seat, 'why', f[3], 'at', tonumber(f[5]), 'by', f[4], 'left_a', tonumber(f[6]), 'left_b', tonumber(f[7]), 'hard', tonumber(f[8])}
end
-- Not closed, so it expired; the record was set to expire 'keep' ms after the room did.
local ended_at = redis.call('PEXPIRETIME', KEYS[1]) - tonumber(f[9])
-- Gone before its expiry without a recorded close (its keys deleted by hand, say): the relay
-- does not know how it ended.
local t = redis.call('TIME')
if ended_at > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then return GONE end
return {'seat', seat, 'why', '', 'at', ended_at, 'by', '', 'left_a', 0, 'left_b', 0, 'hard', tonumber(f[8])}
