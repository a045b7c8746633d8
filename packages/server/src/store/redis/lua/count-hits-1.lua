-- count-hits: adds the hits one relay node counted locally since its last sync to the shared
-- per-address counts of one rate-limit window, and answers the new totals (rate-limit.ts).
-- One call carries every address the node saw in that window, so syncing costs one round
-- trip per window and interval, never one per request.
-- KEYS[1] the window's counts (hash: client key -> hits in this window, all nodes)
-- ARGV[1] ms until the window's key may go (the window's end plus a margin),
-- ARGV[2], ARGV[3], ... pairs of client key and the hits to add (an integer >= 0)
-- Returns: the totals after adding, in the order of the pairs.
local totals = {}
for i = 2, #ARGV, 2 do
  totals[#totals + 1] = redis.call('HINCRBY', KEYS[1], ARGV[i], tonumber(ARGV[i + 1]))
end
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1])) end
return totals
