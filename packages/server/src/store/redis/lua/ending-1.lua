-- ending: how a gone room ended, for one of its seats (the store asks after GONE).
-- KEYS[1] the room's ending record (see includes/seat.lua)
-- ARGV[1] token hash
-- Returns: {seat, reason, ms timestamp of the end, closing seat or '', left for a, left for b}
-- or {GONE} when there is no record (never existed, or ended more than 'keep' ms ago), the
-- token holds no seat of it (a stranger learns nothing), or the room is gone without a
-- recorded close before its expiry (the relay does not know how it ended).
--!include refusals.lua
local f = redis.call('HMGET', KEYS[1], 'ta', 'tb', 'why', 'by', 'at', 'left_a', 'left_b', 'hard', 'keep')
local seat
if f[1] and f[1] == ARGV[1] then seat = 'a' elseif f[2] and f[2] == ARGV[1] then seat = 'b' end
if not seat then return {GONE} end
if f[3] then return {seat, f[3], tonumber(f[5]), f[4], tonumber(f[6]), tonumber(f[7])} end
-- Not closed, so it expired; the record was set to expire 'keep' ms after the room did.
local ended_at = redis.call('PEXPIRETIME', KEYS[1]) - tonumber(f[9])
-- Gone before its expiry, yet not closed by a script that records closes (one from before
-- ending records, during a rolling upgrade) or deleted by hand: the relay does not know how.
local t = redis.call('TIME')
if ended_at > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then return {GONE} end
local why = 'idle_timeout'
if ended_at >= tonumber(f[8]) then why = 'hard_cap' end
return {seat, why, ended_at, '', 0, 0}
