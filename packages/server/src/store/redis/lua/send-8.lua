-- send: appends a text to the peer's inbox and wakes its waiting recv, atomically.
-- KEYS[1..7] the room's keys (see includes/seat.lua), KEYS[8] tally hash of the room's tag
-- ARGV[1] token hash, ARGV[2] idle lifetime ms, ARGV[3] text,
-- ARGV[4] idempotency key ('' for none), ARGV[5] digest of the text ('' for none),
-- ARGV[6] most pending messages, ARGV[7] most pending bytes, ARGV[8] wake channel,
-- ARGV[9] '1' when the text has the shape of an e2e envelope (checked by the caller)
-- Returns: named fields {'id', id, 'replayed', 0 accepted or 1 replay of an earlier send
-- with the same key and text, 'expires_in', ms}; or a refusal: GONE, WRONG_TOKEN,
-- KEY_CONFLICT, MAILBOX_FULL, NOT_AN_ENVELOPE (includes/refusals.lua). A refused send
-- stores nothing, so its retry may succeed.
--!include seat.lua
local seat, failure = seat_of(ARGV[1])
if not seat then return failure end
if ARGV[9] ~= '1' and redis.call('HEXISTS', KEYS[1], 'e2e') == 1 then return NOT_AN_ENVELOPE end
local now_micros = now_us()
local now = math.floor(now_micros / 1000)
local expires_at = touch(seat, now, tonumber(ARGV[2]))
local text = ARGV[3]
local key_field = nil
if ARGV[4] ~= '' then
  -- The key is checked before the mailbox: a retry of an accepted send must get its id
  -- back even when the mailbox has filled up since.
  key_field = seat .. ':' .. ARGV[4]
  local earlier = redis.call('HGET', KEYS[5], key_field)
  if earlier then
    local sep = string.find(earlier, ' ', 1, true)
    expire_room(expires_at)
    if string.sub(earlier, sep + 1) == ARGV[5] then
      return {'id', string.sub(earlier, 1, sep - 1), 'replayed', 1, 'expires_in', expires_at - now}
    end
    return KEY_CONFLICT
  end
end
-- The mailbox, room-wide and both directions together (docs/protocol.md §8): a text that
-- would pass either limit is refused.
local pending = redis.call('LLEN', KEYS[2]) + redis.call('LLEN', KEYS[3])
local pending_bytes = tonumber(redis.call('HGET', KEYS[1], 'bytes'))
if pending >= tonumber(ARGV[6]) or pending_bytes + #text > tonumber(ARGV[7]) then
  expire_room(expires_at)
  return MAILBOX_FULL
end
-- The id: microseconds since the room opened, or one more than the last id when that is
-- larger. Ids increase, and never come back even when Redis loses its latest writes (a kill
-- under appendfsync everysec, a failover to a replica that lagged): the lost sends' ids were
-- minted before the loss, every later one after it. A counter alone would mint a lost id
-- again for another text, and a client that had read the lost message would skip the new
-- one as already handled.
local room = redis.call('HMGET', KEYS[1], 'seq', 'born')
local id = digits(math.max(tonumber(room[1]) + 1, now_micros - tonumber(room[2])))
redis.call('HSET', KEYS[1], 'seq', id)
local recipient = peer_of(seat)
redis.call('HSET', KEYS[4], id, text)
redis.call('RPUSH', inbox_of(recipient), id)
redis.call('HINCRBY', KEYS[1], 'bytes', #text)
if key_field then redis.call('HSET', KEYS[5], key_field, id .. ' ' .. ARGV[5]) end
expire_room(expires_at)
redis.call('HINCRBY', KEYS[8], 'messages', 1)
redis.call('HINCRBY', KEYS[8], 'bytes', #text)
redis.call('SPUBLISH', ARGV[8], recipient)
return {'id', id, 'replayed', 0, 'expires_in', expires_at - now}
