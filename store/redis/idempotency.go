package redis

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// idem is an owner's record for one Idempotency-Key: a hash {fp, id, prev, state (p|d), lock
// (ms, Redis's clock), resp}, expiring TTL after its first use. The owner part is
// length-prefixed, so no owner's keys run into another's.
// The record lives in the owner's bucket.
func (k keys) idem(o store.Owner, key string) string {
	f := ownerField(o)
	return k.tag(k.home(o)) + "idem:" + strconv.Itoa(len(f)) + ":" + f + key
}

// beginIdem: KEYS record; ARGV fingerprint, candidate, lock_ms, ttl_ms, then other forms of the
// fingerprint a record may hold (its tags under the seal keys that no longer seal). Re-running
// it with the same candidate (a retried call whose reply was lost) answers "new" again.
var beginIdem = goredis.NewScript(luaNow + `
local now = now_ms()
local r = redis.call('HMGET', KEYS[1], 'fp', 'state', 'id', 'lock', 'resp', 'prev')
if not r[1] then
  redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'p', 'id', ARGV[2], 'lock', now + tonumber(ARGV[3]))
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {'new', ARGV[2], ''}
end
local same = r[1] == ARGV[1]
for i = 5, #ARGV do
  if r[1] == ARGV[i] then same = true end
end
if not same then return {'mismatch', '', ''} end
if r[2] == 'd' then return {'done', r[3], r[5] or ''} end
if r[3] == ARGV[2] then return {'new', r[3], r[6] or ''} end
if tonumber(r[4]) > now then return {'busy', r[3], ''} end
redis.call('HSET', KEYS[1], 'prev', r[3], 'id', ARGV[2], 'lock', now + tonumber(ARGV[3]))
return {'new', ARGV[2], r[3]}
`)

// completeIdem: KEYS record; ARGV candidate, final, response. 1 when the record is (now) done
// with final, or gone; 0 when another attempt holds it (and, taken over from this one, it no
// longer names it as prev: it undoes what it made), or when the candidate holds it but final,
// another attempt's resource, is no longer the record's prev (that attempt gave it up).
var completeIdem = goredis.NewScript(`
local r = redis.call('HMGET', KEYS[1], 'state', 'id', 'prev')
if not r[1] then return 1 end
if r[1] == 'p' and r[2] == ARGV[1] and ARGV[2] ~= ARGV[1] and r[3] ~= ARGV[2] then return 0 end
if r[1] == 'p' and r[2] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', 'd', 'id', ARGV[2], 'resp', ARGV[3])
  redis.call('HDEL', KEYS[1], 'lock', 'prev')
  return 1
end
if r[1] == 'd' and r[2] == ARGV[2] then return 1 end
if r[1] == 'p' and r[3] == ARGV[1] then redis.call('HDEL', KEYS[1], 'prev') end
return 0
`)

// abandonIdem: KEYS record; ARGV candidate. Only while the candidate holds the record, not
// done: a record it took over goes back to the attempt it was taken from, its lock lapsed
// (store.Idempotency); any other is deleted. A record taken over from the candidate no longer
// names it as prev: it made nothing.
var abandonIdem = goredis.NewScript(`
local r = redis.call('HMGET', KEYS[1], 'state', 'id', 'prev')
if r[1] == 'p' and r[2] ~= ARGV[1] and r[3] == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'prev')
  return 1
end
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 1 end
if r[3] and r[3] ~= '' then
  redis.call('HSET', KEYS[1], 'id', r[3], 'lock', '0')
  redis.call('HDEL', KEYS[1], 'prev')
else
  redis.call('DEL', KEYS[1])
end
return 1
`)

var _ store.Idempotency = (*Store)(nil)

// idemAD is the place an idempotency record's fingerprint is tagged for.
var idemAD = []byte("ask/idempotency-fingerprint")

// BeginIdempotent implements store.Idempotency, in one script.
func (s *Store) BeginIdempotent(ctx context.Context, owner store.Owner, key string, b store.IdemBegin) (store.IdemResult, error) {
	ttl := b.TTL
	if ttl <= 0 {
		ttl = s.ttl
	}
	// The fingerprint is a hash of the request, whose body holds the question: a store that
	// seals (the durable mode, whose Redis writes to disk) keeps a keyed tag of it instead, which
	// no one without the key can test a guessed question against.
	fps := []string{b.Fingerprint}
	if s.seal != nil {
		fps = s.seal.Tags([]byte(b.Fingerprint), idemAD)
	}
	args := []any{fps[0], b.Candidate, ms(b.Lock), ms(ttl)}
	for _, fp := range fps[1:] {
		args = append(args, fp)
	}
	res, err := beginIdem.Run(ctx, s.rdb, []string{s.keys.idem(owner, key)}, args...).StringSlice()
	if err != nil {
		return store.IdemResult{}, wrap(err)
	}
	if len(res) != 3 {
		return store.IdemResult{}, fmt.Errorf("redis store: begin idempotent: unexpected reply of %d values", len(res))
	}
	switch res[0] {
	case "new":
		return store.IdemResult{State: store.IdemNew, ID: res[1], Prev: res[2]}, nil
	case "done":
		return store.IdemResult{State: store.IdemDone, ID: res[1], Response: []byte(res[2])}, nil
	case "mismatch":
		return store.IdemResult{State: store.IdemMismatch}, nil
	case "busy":
		return store.IdemResult{State: store.IdemBusy, ID: res[1]}, nil
	}
	return store.IdemResult{}, fmt.Errorf("redis store: begin idempotent: unexpected status %q", res[0])
}

// CompleteIdempotent implements store.Idempotency.
func (s *Store) CompleteIdempotent(ctx context.Context, owner store.Owner, key, candidate, final string, response []byte) error {
	n, err := completeIdem.Run(ctx, s.rdb, []string{s.keys.idem(owner, key)}, candidate, final, response).Int()
	if err != nil {
		return wrap(err)
	}
	if n != 1 {
		return store.ErrIdemLost
	}
	return nil
}

// AbandonIdempotent implements store.Idempotency.
func (s *Store) AbandonIdempotent(ctx context.Context, owner store.Owner, key, candidate string) error {
	if err := abandonIdem.Run(ctx, s.rdb, []string{s.keys.idem(owner, key)}, candidate).Err(); err != nil {
		return wrap(err)
	}
	return nil
}
