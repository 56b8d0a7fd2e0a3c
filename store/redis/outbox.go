package redis

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// The webhook outbox: one hash per ticket's delivery (wh:<ticket>: id, url, state, attempts,
// status, error, due, delivered, expires in ms, holder and held-until, and the recorder of the
// last attempt) and one zset of pending deliveries by the time they next need a look (wh:due),
// both in the ticket's bucket: one due set per bucket, which ClaimWebhooks scans in turn. A
// claim moves its entry's score to the end of the hold, so a replica that dies holding it
// leaves an entry that comes due again when the hold lapses: the delivery survives its
// deliverer. Every time is Redis's clock (TIME): claims and their lapse, and the due times and
// expiry a caller gives, which go to Redis as offsets from the caller's clock (relMs) and are
// anchored on Redis's there. Given as absolute times, they were read on the caller's clock
// against Redis's: an audit's replica 60 s behind Redis (deadline 20 s, TTL 10 s) registered a
// delivery whose expiry Redis had passed, and it was forgotten at once, never sent; a retry's
// due time came early by the lag.

func (k keys) webhook(b int, ticket string) string { return k.tag(b) + "wh:" + ticket }
func (k keys) webhooksDue(b int) string            { return k.tag(b) + "wh:due" }

var _ store.Outbox = (*Store)(nil)

// relMs is t as an offset (ms) from the caller's clock now, which a script adds to Redis's
// clock; "-" for the zero time (none).
func (s *Store) relMs(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return strconv.FormatInt(t.Sub(s.now()).Milliseconds(), 10)
}

func fromMs(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// addWebhook: a retry of this very registration (its reply was lost, and go-redis ran it
// again) finds the delivery under its own id and answers as the first run did; only another
// id is a conflict.
var addWebhook = goredis.NewScript(luaNow + luaInt + luaAt + `
local id = redis.call('HGET', KEYS[1], 'id')
if id then
  if id == ARGV[1] then return 1 end
  return 0
end
local now = now_ms()
local due, exp = at(now, ARGV[3]), at(now, ARGV[4])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'url', ARGV[2], 'state', 'pending', 'attempts', 0,
  'status', 0, 'error', '', 'due', due, 'delivered', 0, 'expires', exp, 'holder', '', 'held', 0)
redis.call('PEXPIREAT', KEYS[1], exp)
redis.call('ZADD', KEYS[2], due, ARGV[5])
return 1
`)

// luaAt is at(now, rel): the time (ms, an integer string) rel ms after now, Redis's clock; "0"
// (none) for rel "-".
const luaAt = `
local function at(now, rel)
  if rel == '-' then return '0' end
  return int(now + rel)
end
`

// sealURL is a delivery's URL as Redis holds it: sealed when the store seals (the durable
// mode), as the question is. A URL can be a credential (a chat service's incoming-webhook URL
// carries its token in the path), and the durable mode's Redis writes what it holds to disk.
func (s *Store) sealURL(ticket, url string) []byte {
	if s.seal == nil {
		return []byte(url)
	}
	return s.seal.Seal([]byte(url), webhookURLAD(ticket))
}

func webhookURLAD(ticket string) []byte { return []byte("ask/webhook-url\x00" + ticket) }

// AddWebhook registers a pending delivery; see store.Outbox.
func (s *Store) AddWebhook(ctx context.Context, w store.Webhook) error {
	b := s.keys.bucketOf(w.Ticket)
	ok, err := addWebhook.Run(ctx, s.rdb, []string{s.keys.webhook(b, w.Ticket), s.keys.webhooksDue(b)},
		w.ID, s.sealURL(w.Ticket, w.URL), s.relMs(w.Due), s.relMs(w.Expires), w.Ticket).Int()
	if err != nil {
		return wrap(err)
	}
	if ok == 0 {
		return store.ErrConflict
	}
	return nil
}

// removeWebhook: KEYS delivery, due set; ARGV ticket. A script rather than a MULTI: a full
// Redis (maxmemory, noeviction) refuses every command queued in a MULTI, while DEL and ZREM,
// which free memory, run in a script.
var removeWebhook = goredis.NewScript(`
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`)

// RemoveWebhook forgets a delivery.
func (s *Store) RemoveWebhook(ctx context.Context, ticket string) error {
	b := s.keys.bucketOf(ticket)
	return wrap(removeWebhook.Run(ctx, s.rdb, []string{s.keys.webhook(b, ticket), s.keys.webhooksDue(b)}, ticket).Err())
}

var webhookDue = goredis.NewScript(luaNow + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local now = now_ms()
local h = redis.call('HMGET', KEYS[1], 'state', 'held', 'due')
if h[1] == 'pending' and tonumber(h[2]) <= now and tonumber(h[3]) > now then
  redis.call('HSET', KEYS[1], 'due', now)
  redis.call('ZADD', KEYS[2], now, ARGV[1])
end
return 1
`)

// WebhookDue makes a pending, unheld delivery due now.
func (s *Store) WebhookDue(ctx context.Context, ticket string) error {
	b := s.keys.bucketOf(ticket)
	ok, err := webhookDue.Run(ctx, s.rdb, []string{s.keys.webhook(b, ticket), s.keys.webhooksDue(b)}, ticket).Int()
	if err != nil {
		return wrap(err)
	}
	if ok == 0 {
		return store.ErrNotFound
	}
	return nil
}

var claimWebhooks = goredis.NewScript(luaNow + `
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for _, t in ipairs(ids) do
  local k = ARGV[1] .. t
  local h = redis.call('HMGET', k, 'state', 'held', 'due')
  if not h[1] or h[1] ~= 'pending' then
    redis.call('ZREM', KEYS[1], t)
  elseif tonumber(h[2]) <= now and tonumber(h[3]) <= now then
    local held = now + tonumber(ARGV[3])
    redis.call('HSET', k, 'holder', ARGV[2], 'held', held)
    redis.call('ZADD', KEYS[1], held, t)
    table.insert(out, t)
  else
    local next = math.max(tonumber(h[2]), tonumber(h[3]))
    redis.call('ZADD', KEYS[1], next, t)
  end
end
return out
`)

// ClaimWebhooks claims due deliveries for holder; see store.Outbox. It claims bucket by bucket,
// starting at a bucket that moves on at every call so that no bucket's deliveries wait behind
// another's, until it holds limit of them: a claim holds what it returns, so it claims no more.
func (s *Store) ClaimWebhooks(ctx context.Context, holder string, hold time.Duration, limit int) ([]store.Webhook, error) {
	if limit <= 0 {
		limit = 100
	}
	var ids []string
	var refused error // the first bucket that answered with an error reply
	first := int(s.claimFrom.Add(1))
	for i := range s.keys.buckets {
		b := (first + i) % s.keys.buckets
		got, err := claimWebhooks.Run(ctx, s.rdb, []string{s.keys.webhooksDue(b)},
			s.keys.webhook(b, ""), holder, ms(hold), limit-len(ids)).StringSlice()
		if err != nil {
			var reply goredis.Error
			if errors.As(err, &reply) {
				// Redis answered for this bucket alone (TRYAGAIN while its slot migrates,
				// CLUSTERDOWN, OOM…), at once: the other buckets' deliveries are claimed all
				// the same, not held up until it answers again.
				refused = cmp.Or(refused, err)
				continue
			}
			if len(ids) > 0 {
				break // what is claimed is held: deliver it; the rest waits for the next call
			}
			return nil, wrap(err) // no answer: the next bucket would wait as long
		}
		ids = append(ids, got...)
		if len(ids) >= limit {
			break
		}
	}
	if len(ids) == 0 && refused != nil {
		return nil, wrap(refused)
	}
	out := make([]store.Webhook, 0, len(ids))
	for _, id := range ids {
		w, err := s.Webhook(ctx, id)
		if err != nil {
			continue // expired between the claim and now
		}
		out = append(out, w)
	}
	return out, nil
}

// recordWebhook: the record ends the claim and names its recorder, so a retry of this very
// record (its reply was lost) finds its own attempt stored and answers as the first run did,
// rather than "not held". ARGV[9], an expiry ("-": none), brings the delivery's forward when
// sooner.
var recordWebhook = goredis.NewScript(luaNow + luaInt + luaAt + `
local h = redis.call('HMGET', KEYS[1], 'holder', 'state', 'recorder', 'attempts')
if not h[2] then return -1 end
if h[1] ~= ARGV[1] or h[2] ~= 'pending' then
  if h[3] == ARGV[1] and h[2] == ARGV[2] and h[4] == ARGV[3] then return 1 end
  return 0
end
local now = now_ms()
local due = at(now, ARGV[6])
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'attempts', ARGV[3], 'status', ARGV[4], 'error', ARGV[5],
  'due', due, 'delivered', at(now, ARGV[7]), 'holder', '', 'held', 0, 'recorder', ARGV[1])
if ARGV[9] ~= '-' then
  local exp = at(now, ARGV[9])
  local was = redis.call('HGET', KEYS[1], 'expires')
  if not was or tonumber(exp) < tonumber(was) then
    redis.call('HSET', KEYS[1], 'expires', exp)
    redis.call('PEXPIREAT', KEYS[1], exp)
  end
end
if ARGV[2] == 'pending' then
  redis.call('ZADD', KEYS[2], due, ARGV[8])
else
  redis.call('ZREM', KEYS[2], ARGV[8])
end
return 1
`)

// RecordWebhook stores holder's attempt; see store.Outbox.
func (s *Store) RecordWebhook(ctx context.Context, holder string, w store.Webhook) error {
	b := s.keys.bucketOf(w.Ticket)
	res, err := recordWebhook.Run(ctx, s.rdb, []string{s.keys.webhook(b, w.Ticket), s.keys.webhooksDue(b)},
		holder, string(w.State), w.Attempts, w.LastStatus, w.LastError, s.relMs(w.Due), s.relMs(w.DeliveredAt), w.Ticket,
		s.relMs(w.Expires)).Int()
	switch {
	case err != nil:
		return wrap(err)
	case res == -1:
		return store.ErrNotFound
	case res == 0:
		return store.ErrNotHeld
	}
	return nil
}

// Webhook returns a ticket's delivery.
func (s *Store) Webhook(ctx context.Context, ticket string) (store.Webhook, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.webhook(s.keys.bucketOf(ticket), ticket)).Result()
	if err != nil {
		return store.Webhook{}, wrap(err)
	}
	if len(m) == 0 {
		return store.Webhook{}, store.ErrNotFound
	}
	if m["id"] == "" {
		return store.Webhook{}, errors.New("store/redis: webhook entry without an id")
	}
	url, ok := s.open([]byte(m["url"]), webhookURLAD(ticket))
	if !ok {
		return store.Webhook{}, store.ErrNotFound // its seal key was dropped: crypto-shredded, as its ticket is
	}
	return store.Webhook{
		Ticket: ticket, ID: m["id"], URL: string(url), State: gen.WebhookState(m["state"]),
		Attempts: int(atoi(m["attempts"])), LastStatus: int(atoi(m["status"])), LastError: m["error"],
		Due: fromMs(m["due"]), DeliveredAt: fromMs(m["delivered"]), Expires: fromMs(m["expires"]),
	}, nil
}
