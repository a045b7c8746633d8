-- lease-tokens: hands a relay node tokens from one request-limit window's shared per-address
-- budget (RATE_LIMIT_REQUESTS; http/leased-rate-limit.ts). A node admits a call only with a
-- token it holds, so while Redis answers, the nodes together admit no more than the budget
-- per address and window however a client spreads its calls. Also charges the calls a node
-- admitted without a token (while Redis did not answer it) and takes back the tokens a
-- stopping node returns. One call carries every address the node needs tokens for.
-- KEYS[1] the window's budgets (hash: client key -> calls taken in this window by all nodes:
--         tokens granted plus calls charged, less tokens returned)
-- ARGV[1] ms until the window's key may go (the window's end plus a margin)
-- ARGV[2] the budget: calls per address and window (an integer >= 1)
-- ARGV[3], ARGV[4], ARGV[5], ... triples of client key, calls to charge (an integer; negative
--         returns that many unspent tokens) and tokens wanted (an integer >= 0)
-- Returns: per triple, in order, the tokens granted (at most those wanted, at most what is left
-- of the budget after the charge) and the calls taken after the grant, flat:
-- {granted1, taken1, granted2, taken2, ...}
local budget = tonumber(ARGV[2])
local replies = {}
for i = 3, #ARGV, 3 do
  local charge = tonumber(ARGV[i + 1])
  local taken = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or 0)
  if taken + charge < 0 then charge = -taken end
  taken = taken + charge
  local granted = math.min(tonumber(ARGV[i + 2]), math.max(0, budget - taken))
  if charge + granted ~= 0 then taken = redis.call('HINCRBY', KEYS[1], ARGV[i], charge + granted) end
  replies[#replies + 1] = granted
  replies[#replies + 1] = taken
end
if redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1])) end
return replies
