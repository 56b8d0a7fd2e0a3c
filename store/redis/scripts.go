package redis

import (
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts below are where every promise that spans more than one key is kept: Redis
// runs a script atomically, so admission, appends with their eviction, and the end of a log are
// each one indivisible step, whichever replica runs them. Times come from the server's clock
// (TIME), so replicas with skewed clocks agree on leases and expiry.
//
// Every script that writes gives the same answer when re-run with the same arguments after
// its reply was lost (go-redis retries a command whose connection failed, and the service
// retries a call the store did not answer): the caller cannot tell whether the first run
// happened, so each script recognises its own earlier effect by reading it back (the same
// event at the same seq by the same runner, the ticket or conversation with the same owner
// and creation time, the done event it wrote) and answers ok, never a conflict.

// sweepConvs bounds the conversations' entries a Lapsed sweep looks at in a bucket (sweep_convs):
// each costs a PTTL, where the tickets' expired entries go in one ZREMRANGEBYSCORE.
const sweepConvs = "1000"

// recheckRunning is how far ahead a sweep scores the entry of a conversation an ask runs in
// (sweep_convs): it is looked at again then. A store whose TTL is shorter looks again after its
// TTL (Store.recheck), so that a conversation gone at its TTL leaves the set within about two.
const recheckRunning = time.Minute

// The Lua helpers the scripts below share, each script taking only those it calls: a script
// defines its helpers (closures) at every call, which costs about 0.05 µs a helper.
//
// Numbers cost more than commands in Lua here: a number passed to redis.call is formatted
// with "%.17g", and tonumber(s) parses s twice (it asks whether s is a number, then converts
// it). So the scripts pass redis.call strings ('1', int(n), '-1'), and read a numeric argument
// as ARGV[i] + 0 (one parse), keeping tonumber for a value that may be nil. Counted with
// callgrind (ASK_REDIS_COST=20 ASK_REDIS_COST_CALLGRIND=1 go test ./store/redis -run
// TestAskCycleCost -v), this and the other savings of its kind below (an end reads only the
// ticket's fields it needs; endTickets builds its tables whole and reads the clock once; a
// creation asks EXISTS before it reads a ticket that is almost never there) took
// redis-server's instructions per ask from 614k to 532k (-13%; on a server run as
// the others are, with the project's stream-node-max-bytes).

// luaDenyOOM starts a script that a full Redis (maxmemory with noeviction) must refuse whole
// (OOM, store.ErrUnavailable): the shebang (Redis 7) declares the script's flags, here none, so
// that it is a write that may grow memory. A script without it is refused only if its first
// write may grow memory: a creation, whose first write is a DEL or a ZREMRANGEBYSCORE, would
// then be taken by a full Redis and the ask admitted, only for its run's appends to be refused.
const luaDenyOOM = "#!lua\n"

// luaNow is now_ms, Redis's clock.
const luaNow = `
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
`

// luaOnceNow is now_ms for endTickets: luaNow's, read once per call, by the first end that
// asks for it (the ends of a call run as one step, so they have one now).
const luaOnceNow = luaNow + `
local clock_ms, once_now = now_ms, nil
now_ms = function()
  once_now = once_now or clock_ms()
  return once_now
end
`

// luaAppend is append_events.
const luaAppend = `
-- append the events ARGV[base + 3i], ARGV[base + 3i + 1], ARGV[base + 3i + 2] (seq, type, data)
-- for i from .. n - 1 after the log's last seq last: past max retained entries, each evicts the
-- oldest step (and only a step) first. The log holds at most last entries (its ids are distinct
-- seqs up to last), so its length is read only when the batch could pass max; the step count is
-- written once, and the caller writes the ticket's last seq. It answers the steps evicted and the
-- last seq appended.
local function append_events(tk, log, steps, base, from, n, max, last)
  local len, evicted, nsteps, seq = nil, 0, 0, nil
  if last + n - from > max then len = redis.call('XLEN', log) end
  for i = from, n - 1 do
    local typ
    seq, typ = ARGV[base + 3 * i], ARGV[base + 3 * i + 1]
    if len and len >= max then
      local s = redis.call('LPOP', steps)
      if s then
        len = len - redis.call('XDEL', log, s .. '-0')
        evicted = evicted + 1
      end
    end
    redis.call('XADD', log, seq .. '-0', 't', typ, 'd', ARGV[base + 3 * i + 2])
    if len then len = len + 1 end
    if typ == 'step' then
      redis.call('RPUSH', steps, seq)
      nsteps = nsteps + 1
    end
  end
  if nsteps > 0 then redis.call('HINCRBY', tk, 'steps', int(nsteps)) end
  return evicted, seq, nsteps
end
`

// luaInt is int; luaRoom is room (uses nothing else).
const luaInt = `
-- a time or expiry (ms) as the integer string Redis parses: a Lua number would be formatted as a
-- double ("%.17g"), which costs more than the command it is passed to
local function int(n) return string.format('%d', n) end
`

const luaRoom = `
-- whether the zset key (id -> expiry ms) has room for one more live entry under max (0: no cap),
-- beside the extra entries counted elsewhere (the running set, for the tickets: a running ticket
-- enters the tickets set at its end). Expired entries are dropped only when they could matter:
-- when the entries, expired or not, reach max (a store-wide set is also swept by Lapsed), or
-- always when there is no cap, so the answer is exact and the set never holds more than max
-- entries.
local function room(key, max, now, extra)
  extra = extra or 0
  if max <= 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    return true
  end
  if redis.call('ZCARD', key) + extra < max then return true end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key) + extra < max
end
`

// luaFirstDue is first_due (uses int).
const luaFirstDue = `
-- how long (ms, as a string) until the first entry of the tickets zset key (id -> expiry ms) is
-- due, by now; '0' when none is (every entry at +inf: a running ticket). A refusal at an owner's
-- cap answers it, for the client's Retry-After (room has swept what is past).
local function first_due(key, now)
  local s = redis.call('ZRANGEBYSCORE', key, '(' .. int(now), '(+inf', 'WITHSCORES', 'LIMIT', '0', '1')[2]
  if not s then return '0' end
  return int(s - now)
end
`

// luaFirstDueConv is first_due_conv (uses int).
const luaFirstDueConv = `
-- first_due for a conversations zset: an entry's score is where its hash's expiry was at its
-- creation or its last sweep (sweep_convs), never later than it is (an ask's end only pushes the
-- hash's expiry on), so the hashes of the entries in score order are read (PTTL; -1: an ask runs
-- in it, not due) until the next score is past the soonest expiry found, 64 at most. '0' when
-- none of those is due.
local function first_due_conv(key, cprefix, now)
  local e = redis.call('ZRANGEBYSCORE', key, '(' .. int(now), '(+inf', 'WITHSCORES', 'LIMIT', '0', '64')
  local best = nil
  for i = 1, #e, 2 do
    if best and e[i + 1] + 0 >= best then break end
    local ttl = redis.call('PTTL', cprefix .. e[i])
    if ttl > 0 and (not best or now + ttl < best) then best = now + ttl end
  end
  if not best then return '0' end
  return int(best - now)
end
`

// luaConvs is sweep_convs and room_convs (uses int).
const luaConvs = `
-- a conversations zset (convs, or an owner's) keeps an entry's score at the conversation's expiry
-- as its creation set it: the asks in it leave the sets alone (createTicket persists the
-- conversation's hash, and the end gives the hash a new expiry), so a score can fall behind its
-- hash. An entry whose score has passed is a conversation that is gone (its hash expired:
-- dropped), or one an ask runs in (its hash persisted: scored a minute ahead, to be looked at
-- again then), or one whose hash lives on (scored at its expiry). Entries at +inf (a restored
-- ticket's conversation, as an earlier version scored it) are looked at too, and leave +inf
-- the same way, so a sweep with a limit always gets on. At most limit entries of each kind (0:
-- every one). cprefix names a conversation's hash; recheck is how far ahead (ms) a running one is
-- scored.
local function sweep_convs(key, cprefix, now, limit, recheck)
  for _, from in ipairs({'-inf', '+inf'}) do
    local to = now
    if from == '+inf' then to = '+inf' end
    local ids
    if limit > 0 then
      ids = redis.call('ZRANGEBYSCORE', key, from, to, 'LIMIT', 0, limit)
    else
      ids = redis.call('ZRANGEBYSCORE', key, from, to)
    end
    for _, id in ipairs(ids) do
      local ttl = redis.call('PTTL', cprefix .. id)
      if ttl == -2 then
        redis.call('ZREM', key, id)
      elseif ttl == -1 then
        redis.call('ZADD', key, int(now + recheck), id)
      else
        redis.call('ZADD', key, int(now + ttl), id)
      end
    end
  end
end
-- room for conversations zsets (see sweep_convs), exact as room is
local function room_convs(key, cprefix, max, now, recheck)
  if max <= 0 then
    sweep_convs(key, cprefix, now, 0, recheck)
    return true
  end
  if redis.call('ZCARD', key) < max then return true end
  sweep_convs(key, cprefix, now, 0, recheck)
  return redis.call('ZCARD', key) < max
end
`

// luaLatest is latest.
const luaLatest = `
-- the score of the zset key's latest entry (nil when it is empty), and whether it is +inf
-- (which Redis writes as inf)
local function latest(key)
  local top = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2]
  if not top then return nil, false end
  return top, top == 'inf' or top == '+inf'
end
`

// luaOwners is touch_owner and touch_owners (uses latest).
const luaOwners = `
-- an owner's zsets (id -> expiry ms) live as long as their last entry, and have no expiry while
-- any ticket of the owner runs (its tickets' zset then holds an entry at +inf; createTicket
-- persists both). touch_owner sets key's expiry from its latest entry, and reports whether that
-- entry is at +inf.
local function touch_owner(key)
  local top, inf = latest(key)
  if not top then return false end
  if inf then
    redis.call('PERSIST', key)
    return true
  end
  redis.call('PEXPIREAT', key, top)
  return false
end
-- the owner's zsets' expiry after a change: none while one of its tickets runs, else each
-- until its latest entry expires. Only the tickets' +inf means an ask runs: a conversation's
-- entry at +inf (a restored ticket's, as an earlier version scored it) is looked past, so that
-- it cannot take the owner's conversations out of expiry for good.
local function touch_owners(tickets, convs)
  if touch_owner(tickets) then
    redis.call('PERSIST', convs)
    return
  end
  local top = redis.call('ZREVRANGEBYSCORE', convs, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', '0', '1')[2]
  if top then redis.call('PEXPIREAT', convs, top) end
end
`

// createConversation: KEYS conv, turns, convs, owner's convs, owner's tickets; ARGV id, tenant,
// oid, created, ttl_ms, max, max per owner, recheck_ms (sweep_convs).
var createConversation = goredis.NewScript(luaDenyOOM + luaNow + luaInt + luaFirstDueConv + luaConvs + luaLatest + luaOwners + `
if redis.call('EXISTS', KEYS[1]) == 1 then
  local c = redis.call('HMGET', KEYS[1], 'tenant', 'oid', 'created')
  -- a retry of this very call (its reply was lost): the conversation it created is ok
  if c[1] == ARGV[2] and c[2] == ARGV[3] and c[3] == ARGV[4] then return 'ok' end
  return 'taken'
end
local now = now_ms()
-- the conversations' hashes are named as this one's: the id after a prefix
local cprefix = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[1])
if not room_convs(KEYS[4], cprefix, ARGV[7] + 0, now, ARGV[8] + 0) then
  return 'ownerfull ' .. first_due_conv(KEYS[4], cprefix, now)
end
if not room_convs(KEYS[3], cprefix, ARGV[6] + 0, now, ARGV[8] + 0) then return 'full' end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'oid', ARGV[3], 'created', ARGV[4], 'running', '', 'turns', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local exp = int(now + ARGV[5])
redis.call('ZADD', KEYS[3], exp, ARGV[1])
redis.call('ZADD', KEYS[4], exp, ARGV[1])
touch_owners(KEYS[5], KEYS[4])
return 'ok'
`)

// dropConversation: KEYS conv, turns, convs, owner's convs; ARGV id, tenant, oid, created,
// ttl_ms. It removes the conversation createConversation made with these arguments if nothing
// has used it (no ask runs in it, no turn), releasing its entries in the
// conversations sets (the caps count them there), and leaves in its place, for ttl_ms, a hash
// with no owner, so that a creation still on its way (a stalled connection's, a client's retry)
// finds the id taken and makes nothing: the drop and that creation may reach Redis in either
// order. 'absent' when there was nothing of its own to remove (a drop re-run after a lost
// reply answers it too), 'used' when the conversation is in use, which is left as it is.
// allow-oom: at capacity, a drop is what frees memory.
var dropConversation = goredis.NewScript(`#!lua flags=allow-oom
local c = redis.call('HMGET', KEYS[1], 'tenant', 'oid', 'created', 'running', 'turns')
local status = 'absent'
if c[1] or c[2] or c[3] or c[4] or c[5] then
  if c[1] ~= ARGV[2] or c[2] ~= ARGV[3] or c[3] ~= ARGV[4] then return 'absent' end
  if (c[4] and c[4] ~= '') or (c[5] and c[5] ~= '0') or redis.call('EXISTS', KEYS[2]) == 1 then
    return 'used'
  end
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  status = 'ok'
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return 'absent'
end
redis.call('HSET', KEYS[1], 'dropped', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return status
`)

// createTicket: KEYS conv, turns, ticket, log, tickets, running, owner's convs, owner's tickets;
// ARGV tid, cid, tenant, oid, created, accepted, max_inflight, max_tickets, runner, lease_ms,
// max_retained per owner, max_turns, n, then n times seq, type, data: the events that follow
// accepted (never steps), appended with it; then the question (as the store keeps it: sealed
// when it seals). An owner's running tickets are its tickets whose expiry is +inf, so the
// in-flight cap counts them there; the conversation's hash counts its turns. The store-wide
// tickets set takes the ticket at its end: until then the running set counts it (the cap is the
// two together). The conversations sets are left alone, here and at the end: the conversation's
// hash is persisted while the ask runs and given a new expiry at its end, and a sweep reads its
// entries' scores from it (sweep_convs).
var createTicket = goredis.NewScript(luaDenyOOM + luaNow + luaInt + luaRoom + luaFirstDue + `
if redis.call('EXISTS', KEYS[3]) == 1 then
  local t = redis.call('HMGET', KEYS[3], 'conv', 'tenant', 'oid', 'runner', 'created')
  -- a retry of this very call (its reply was lost): the ticket it created is ok, with the
  -- turns it answered then (the ticket runs, so no turn was added since). The ticket is
  -- known by its random id, conversation, owner, runner and creation time (to the ns); its
  -- accepted event is not compared, as a sealed one differs at every sealing.
  if t[1] == ARGV[2] and t[2] == ARGV[3] and t[3] == ARGV[4] and t[4] == ARGV[9] and t[5] == ARGV[5] then
    return {'ok', redis.call('LRANGE', KEYS[2], '0', '-1')}
  end
  return {'taken'}
end
local c = redis.call('HMGET', KEYS[1], 'tenant', 'oid', 'running', 'turns')
if not c[1] or c[1] ~= ARGV[3] or c[2] ~= ARGV[4] then return {'notfound'} end
if c[3] and c[3] ~= '' then return {'conflict', c[3]} end
-- a conversation written before its hash counted the turns: the list's length
local nturns = c[4] and c[4] + 0 or redis.call('LLEN', KEYS[2])
local maxturns = ARGV[12] + 0
if maxturns > 0 and nturns >= maxturns then return {'turns'} end
local maxf = ARGV[7] + 0
-- the owner's running tickets, when the cap asks for them (else unknown: nil)
local inflight = maxf > 0 and redis.call('ZCOUNT', KEYS[8], '+inf', '+inf') or nil
if inflight and inflight >= maxf then return {'inflight'} end
local now = now_ms()
if not room(KEYS[8], ARGV[11] + 0, now) then return {'ownerfull', first_due(KEYS[8], now)} end
local maxt = ARGV[8] + 0
if not room(KEYS[5], maxt, now, maxt > 0 and redis.call('ZCARD', KEYS[6]) or 0) then return {'full'} end
local n = ARGV[13] + 0
redis.call('HSET', KEYS[3], 'conv', ARGV[2], 'tenant', ARGV[3], 'oid', ARGV[4], 'created', ARGV[5],
  'last', int(1 + n), 'finished', '0', 'runner', ARGV[9], 'steps', '0',
  'q', ARGV[14 + 3 * n])
redis.call('XADD', KEYS[4], '1-0', 't', 'accepted', 'd', ARGV[6])
for i = 0, n - 1 do
  redis.call('XADD', KEYS[4], ARGV[14 + 3 * i] .. '-0', 't', ARGV[15 + 3 * i], 'd', ARGV[16 + 3 * i])
end
redis.call('HSET', KEYS[1], 'running', ARGV[1])
redis.call('PERSIST', KEYS[1])
redis.call('ZADD', KEYS[8], '+inf', ARGV[1])
-- while one of the owner's tickets runs, its sets have no expiry already (see touch_owners)
if not inflight or inflight == 0 then
  redis.call('PERSIST', KEYS[7])
  redis.call('PERSIST', KEYS[8])
end
redis.call('ZADD', KEYS[6], int(now + ARGV[10]), ARGV[1])
if nturns == 0 then return {'ok', {}} end
redis.call('PERSIST', KEYS[2])
return {'ok', redis.call('LRANGE', KEYS[2], '0', '-1')}
`)

// appendEvents: KEYS ticket, log, steps; ARGV max, runner, channel, tid, n, then n times seq,
// type, data (seqs running on by one: the caller checks). It answers {status, evicted}. Re-run
// after a lost reply, whole or in part, it answers ok: when the log's last seq falls within the
// batch and the log's last entry is the batch's event at that seq (it is the last entry, so no
// eviction can have removed it), the events up to it are a previous run's by this runner, and
// only the rest are appended.
var appendEvents = goredis.NewScript(luaInt + luaAppend + `
local h = redis.call('HMGET', KEYS[1], 'finished', 'runner', 'last', 'ending')
if not h[1] then return {'notfound', 0} end
if h[2] ~= ARGV[2] then return {'finished', 0} end
local n, first, last = ARGV[5] + 0, ARGV[6] + 0, h[3] + 0
local from = 0
if first <= last and last - first < n then
  local i = last - first
  local e = redis.call('XRANGE', KEYS[2], last .. '-0', last .. '-0')
  if e[1] and e[1][2][2] == ARGV[7 + 3 * i] and e[1][2][4] == ARGV[8 + 3 * i] then
    from = i + 1
    if from == n then return {'ok', 0} end
  end
end
if h[1] == '1' or h[4] == '1' then return {'finished', 0} end
if first + from ~= last + 1 then return {'seq', 0} end
local evicted, seq = append_events(KEYS[1], KEYS[2], KEYS[3], 6, from, n, ARGV[1] + 0, last)
redis.call('HSET', KEYS[1], 'last', seq)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {'ok', evicted}
`)

// endTicket appends a log's tail and ends the ticket: the runner's Finish (mode own), End
// from any replica (mode any, or lapsed: only once the lease has lapsed), or the runner's
// Restore of a log the store lost part or all of (mode restore: the tail may skip seqs, and a
// ticket that is gone is first re-created from the extra ARGV tenant, oid, created, accepted, question, m, then m
// times seq, type, data of the events its creation wrote after accepted, then the turns its
// conversation held at its admission, its owner's cap of conversations, the bucket's and the
// recheck (ms) that room_convs takes: a conversation that is gone too is re-created only when
// the turns are 0, for one that held turns lost them and stays gone, and only within both caps;
// one held by an ask created before the restored one keeps the restored ask's turn in its hash,
// under next:<that ask>, for that ask's end to record after its own). An End whose tail
// does not continue the log (the runner appended meanwhile) fails with 'seq' but marks the
// ticket ending: from then on the runner's appends, renewals and own finish are refused, so
// the log stops moving and the caller's retry, with the ticket read again, succeeds.
// KEYS ticket, log, steps, conv, turns, running, tickets, convs, owner's convs, owner's tickets; ARGV mode, runner, channel, tid, cid, ttl_ms, max, turn, terminal index, done index, n,
// then n times seq, type, data. It answers a status word, or, when it ended the ticket now,
// {'ok', the steps the bound evicted for the tail}.
var endTicket = goredis.NewScript(luaNow + luaInt + luaConvs + luaAppend + luaLatest + luaEnd)

// luaEnd is endTicket's body, which endTickets runs once per ticket.
const luaEnd = `
local h = redis.call('HMGET', KEYS[1], 'finished', 'runner', 'last', 'conv', 'ending', 'steps')
local mode = ARGV[1]
local n = ARGV[11] + 0
local park -- the ask this restored ask's turn waits for (below)
if not h[1] then
  if mode ~= 'restore' then return 'notfound' end
  -- the ticket is gone (a store restart lost it): re-create it as createTicket did, without
  -- the caps (it was admitted), so that it ends rather than vanishes
  local x = 12 + 3 * n
  -- the events createTicket wrote after accepted (the supervisor branch's open), which the
  -- restored log must open with for its end to close it
  local m = (ARGV[x + 5] or 0) + 0
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('HSET', KEYS[1], 'conv', ARGV[5], 'tenant', ARGV[x], 'oid', ARGV[x + 1], 'created', ARGV[x + 2],
    'last', int(1 + m), 'finished', '0', 'runner', ARGV[2], 'steps', '0')
  redis.call('XADD', KEYS[2], '1-0', 't', 'accepted', 'd', ARGV[x + 3])
  for i = 0, m - 1 do
    redis.call('XADD', KEYS[2], ARGV[x + 6 + 3 * i] .. '-0', 't', ARGV[x + 7 + 3 * i], 'd', ARGV[x + 8 + 3 * i])
  end
  redis.call('HSET', KEYS[1], 'q', ARGV[x + 4])
  if redis.call('EXISTS', KEYS[4]) == 0 then
    -- gone with its turns, if it held any: then it stays gone (the restored turn is not
    -- recorded) rather than come back without them; and gone when it no longer fits the caps
    -- it was admitted under (its owner's, the store's: the owner may have opened others in the
    -- emptied store meanwhile), rather than put its owner past them
    local y = x + 6 + 3 * m
    local cprefix = string.sub(KEYS[4], 1, #KEYS[4] - #ARGV[5])
    local function fits(key, max)
      max = (max or 0) + 0
      return max <= 0 or room_convs(key, cprefix, max, now_ms(), (ARGV[y + 3] or 0) + 0)
    end
    if (ARGV[y] or 0) + 0 == 0 and fits(KEYS[9], ARGV[y + 1]) and fits(KEYS[8], ARGV[y + 2]) then
      redis.call('HSET', KEYS[4], 'tenant', ARGV[x], 'oid', ARGV[x + 1], 'created', ARGV[x + 2], 'running', ARGV[4])
      -- the conversation's entries at the expiry this end gives its hash (below), never at
      -- +inf: an owner's set at +inf reads as an ask running, and would never expire again
      local cexp = int(now_ms() + ARGV[6])
      redis.call('ZADD', KEYS[8], cexp, ARGV[5])
      redis.call('ZADD', KEYS[9], cexp, ARGV[5])
    end
  else
    local other = redis.call('HGET', KEYS[4], 'running') or ''
    if other == '' then
      redis.call('HSET', KEYS[4], 'running', ARGV[4])
    else
      -- held by an ask this Redis still has running: one created before this one is the ask
      -- before it in the conversation, whose end the restart lost too (its replica writes it
      -- again, or the lease sweep ends it). This ask's turn waits on the conversation for that
      -- end, which records it after its own, rather than be left out of the history.
      local tprefix = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[4])
      local created = redis.call('HGET', tprefix .. other, 'created')
      if created and created + 0 < ARGV[x + 2] + 0 then park = other end
    end
  end
  redis.call('ZADD', KEYS[7], '+inf', ARGV[4])
  redis.call('ZADD', KEYS[10], '+inf', ARGV[4])
  h = {'0', ARGV[2], tostring(1 + m), ARGV[5], false, '0'}
end
if h[1] == '1' then
  -- a retry of this very end (its reply was lost): this instance wrote the ticket's done, which
  -- the log holds (a ticket ended before the hash stopped keeping a copy has it in the hash)
  local di = ARGV[10] + 0
  local d = redis.call('HMGET', KEYS[1], 'done_seq', 'done', 'ender')
  if d[3] == ARGV[2] and d[1] == ARGV[12 + 3 * di] then
    local done = d[2]
    if not done then
      local e = redis.call('XRANGE', KEYS[2], d[1] .. '-0', d[1] .. '-0')
      done = e[1] and e[1][2][4]
    end
    if done == ARGV[14 + 3 * di] then return 'ok' end
  end
  return 'finished'
end
if h[4] ~= ARGV[5] then return 'notfound' end
if (mode == 'own' or mode == 'restore') and (h[2] ~= ARGV[2] or h[5] == '1') then return 'finished' end
local now = now_ms()
if mode == 'lapsed' then
  local s = redis.call('ZSCORE', KEYS[6], ARGV[4])
  if s and s + 0 > now then return 'held' end
end
local last = h[3] + 0
local first = last + 1
if mode == 'restore' then
  -- the tail comes after every seq the runner assigned: the lost events leave a gap
  first = ARGV[12] + 0
  if first <= last then return 'seq' end
elseif mode ~= 'own' then
  -- an end from elsewhere comes after the floor (raiseFloor): seqs readers were given that a
  -- restart lost are a gap, not given to its events
  local f = redis.call('HGET', KEYS[1], 'floor')
  if f and f + 0 > last then first = f + 1 end
end
for i = 0, n - 1 do
  if ARGV[12 + 3 * i] + 0 ~= first + i then
    if mode ~= 'own' then redis.call('HSET', KEYS[1], 'ending', '1') end
    return 'seq'
  end
end
local evicted, seq, nsteps = append_events(KEYS[1], KEYS[2], KEYS[3], 12, 0, n, ARGV[7] + 0, last)
local ti, di = ARGV[9] + 0, ARGV[10] + 0
-- the terminal event and done are in the log, which lives as long as the hash: the hash names
-- them (a copy of their data would turn the hash from a listpack into a hashtable)
redis.call('HSET', KEYS[1], 'last', seq, 'finished', '1', 'ender', ARGV[2],
  'term_seq', ARGV[12 + 3 * ti], 'term_type', ARGV[13 + 3 * ti], 'done_seq', ARGV[12 + 3 * di])
local ttl = ARGV[6]
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
-- the steps' index exists only if a step was appended
if nsteps > 0 or h[6] ~= '0' then redis.call('PEXPIRE', KEYS[3], ttl) end
local exp = int(now + ttl)
redis.call('ZREM', KEYS[6], ARGV[4])
redis.call('ZADD', KEYS[7], exp, ARGV[4])
redis.call('ZADD', KEYS[10], exp, ARGV[4])
local cv = redis.call('HMGET', KEYS[4], 'running', 'next:' .. ARGV[4])
if cv[1] == ARGV[4] then
  -- an empty turn records none (an ask ended unrun after its caller was told it had not started)
  if ARGV[8] == '' then
    redis.call('HSET', KEYS[4], 'running', '')
  else
    redis.call('HSET', KEYS[4], 'running', '', 'turns', int(redis.call('RPUSH', KEYS[5], ARGV[8])))
  end
  if cv[2] then
    -- the next ask's turn, which its restore left to wait for this end (park, above)
    redis.call('HDEL', KEYS[4], 'next:' .. ARGV[4])
    redis.call('HSET', KEYS[4], 'turns', int(redis.call('RPUSH', KEYS[5], cv[2])))
  end
  redis.call('PEXPIRE', KEYS[4], ttl)
  redis.call('PEXPIRE', KEYS[5], ttl)
elseif park and ARGV[8] ~= '' then
  redis.call('HSETNX', KEYS[4], 'next:' .. park, ARGV[8])
end
-- The conversations sets keep the conversation's entry at the score its creation gave it: an
-- entry whose score has passed is looked at again (sweep_convs) before it is dropped, and its
-- hash, which this end gave a new expiry, tells. The owner's sets: while another ticket of the
-- owner runs, both stay without expiry (createTicket persisted them); else each lives until
-- its latest entry expires, and no conversation of the owner expires after this one, whose
-- hash now lives the store's TTL from now (any later end or creation moves it on again).
local top, inf = latest(KEYS[10])
if top and not inf then
  redis.call('PEXPIREAT', KEYS[10], top)
  redis.call('PEXPIREAT', KEYS[9], exp)
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {'ok', evicted}
`

// endTickets is endTicket for several tickets of one bucket in one call, for the runs' own ends
// that arrive together (ends.go): fewer commands for the service to send and Redis to parse and
// dispatch, the same work per ticket. ARGV[1] is the count; then per ticket its key count, its
// argument count, and its arguments, its keys following one another in KEYS. Each end runs as
// endTicket would, in a protected call, so that one which raises an error (a key of the wrong
// type) answers {'error', message} for itself and the others still run. It answers the ends'
// replies in order. The helpers that read neither KEYS nor ARGV are made once per call;
// append_events, which reads ARGV, once per end; the clock is read once per call.
var endTickets = goredis.NewScript(luaOnceNow + luaInt + luaConvs + luaLatest + `
local function one(KEYS, ARGV)
` + luaAppend + luaEnd + `
end
local out = {}
local kp, ap = 0, 2
for i = 1, ARGV[1] + 0 do
  local nk, na = ARGV[ap] + 0, ARGV[ap + 1] + 0
  ap = ap + 2
  -- each table made whole by its constructor (one allocation of its array, where filling it
  -- element by element would grow it five times)
  local keys, argv = {unpack(KEYS, kp + 1, kp + nk)}, {unpack(ARGV, ap, ap + na - 1)}
  kp, ap = kp + nk, ap + na
  local ok, r = pcall(one, keys, argv)
  if not ok then
    if type(r) == 'table' then r = r.err end
    r = {'error', tostring(r)}
  end
  out[i] = r
end
return out
`)

// renew: KEYS ticket, running; ARGV runner, lease_ms, tid, model_calls, in, out. Re-run, it
// extends the lease again: the same answer.
var renew = goredis.NewScript(luaNow + luaInt + `
local h = redis.call('HMGET', KEYS[1], 'finished', 'runner', 'ending')
if not h[1] then return 'notfound' end
if h[1] == '1' or h[2] ~= ARGV[1] or h[3] == '1' then return 'finished' end
redis.call('ZADD', KEYS[2], int(now_ms() + ARGV[2]), ARGV[3])
redis.call('HSET', KEYS[1], 'model_calls', ARGV[4], 'in', ARGV[5], 'out', ARGV[6])
return 'ok'
`)

// raiseFloor: KEYS ticket; ARGV seq. The running ticket's floor (store.Ticket.Floor) becomes seq
// if seq is beyond both the log's last seq and the floor; a finished ticket is left alone.
var raiseFloor = goredis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'finished', 'last', 'floor')
if not h[1] then return 'notfound' end
if h[1] == '1' then return 'finished' end
local seq = ARGV[1] + 0
if seq > h[2] + 0 and seq > (h[3] or 0) + 0 then redis.call('HSET', KEYS[1], 'floor', ARGV[1]) end
return 'ok'
`)

// lapsed: KEYS running, tickets, convs; ARGV ticket key prefix, limit, conversation key prefix,
// recheck_ms (sweep_convs).
// Entries whose ticket is gone are dropped from the running set, and expired ones from the
// bucket's tickets and conversations (creation drops them only when the cap is near: see room
// and room_convs), at most sweepConvs of the conversations' at a time.
var lapsed = goredis.NewScript(luaNow + luaInt + luaConvs + `
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
sweep_convs(KEYS[3], ARGV[3], now, ` + sweepConvs + `, ARGV[4] + 0)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', '0', ARGV[2])
local out = {}
for _, id in ipairs(ids) do
  if redis.call('EXISTS', ARGV[1] .. id) == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    table.insert(out, id)
  end
end
return out
`)
