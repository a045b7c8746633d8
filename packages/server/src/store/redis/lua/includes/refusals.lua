-- Refusals: what a script returns (alone, or first in its reply) when it refuses and changes
-- nothing. One meaning each across every script; refusals.ts (Refusal) reads them back.
local GONE = -1            -- no such room, or it ended: 404 (with how it ended, when kept)
local WRONG_TOKEN = -2     -- the token holds no seat of this room: 401
local CODE_IN_USE = -3     -- open: the minted code names a live or recently ended room
local FULL = -4            -- join: both seats are taken: 409 full
local KEY_CONFLICT = -5    -- send: the idempotency key was used for another text: 409
local MAILBOX_FULL = -6    -- send: the room's pending messages or bytes would pass the limit: 429
local NOT_AN_ENVELOPE = -7 -- send: plain text in an end-to-end encrypted room: 400 e2e_required
local UNREAD = -8          -- close without force: messages are still pending: 409 unread
local TOO_MANY_ROOMS = -9  -- claim: the address holds its budget of live rooms: 429 too_many_rooms
