package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"
)

// The store's reads that take more than one key at one instant (a ticket and its log's tail, a
// conversation and its turns, the tail hub's read of a log) are read-only scripts, not MULTI
// transactions. A Redis at its maxmemory with noeviction (as docs/scale-out.md advises) refuses
// every command queued in a MULTI, reads too, and then the EXEC (EXECABORT): a full Redis would
// turn every read into an error. A script is as atomic as the MULTI was, and one declared
// no-writes (the shebang, Redis 7) is served when Redis refuses writes: no-writes implies
// allow-oom. A script without the shebang would be served too, but only as long as it calls no
// command that may grow memory; the flag says it cannot, and Redis holds it to that.

// readTicket: KEYS ticket, log. The ticket's hash (HGETALL) and the log's last two entries.
var readTicket = goredis.NewScript(`#!lua flags=no-writes
return {redis.call('HGETALL', KEYS[1]), redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', '2')}
`)

// readTail: KEYS ticket, log; ARGV the first entry id to read. The finished flag (nil when the
// ticket is gone), the log from that entry on, the log's length and the ticket's PTTL.
var readTail = goredis.NewScript(`#!lua flags=no-writes
return {redis.call('HGET', KEYS[1], 'finished'), redis.call('XRANGE', KEYS[2], ARGV[1], '+'),
  redis.call('XLEN', KEYS[2]), redis.call('PTTL', KEYS[1])}
`)

// readConversation: KEYS conversation, its turns. The hash (HGETALL) and every turn.
var readConversation = goredis.NewScript(`#!lua flags=no-writes
return {redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], '0', '-1')}
`)

// readScript runs sc, a read-only script, on keys and args, and answers its reply's parts.
func (s *Store) readScript(ctx context.Context, sc *goredis.Script, keys []string, args ...any) ([]any, error) {
	c := newEval(sc, len(keys), len(args))
	for _, k := range keys {
		c = append(c, k)
	}
	c = append(c, args...)
	res, err := eval(ctx, s.rdb, sc, c).Slice()
	if err != nil {
		return nil, wrap(err)
	}
	return res, nil
}

// errReply is what a read says of a script reply it cannot take apart (never, from the scripts above).
var errReply = errors.New("redis store: unexpected reply from a read script")

// hashOf is an HGETALL reply (field, value, ...) as a map.
func hashOf(v any) map[string]string {
	flat, _ := v.([]any)
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		m[k] = val
	}
	return m
}

// stringsOf is an array reply of strings.
func stringsOf(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		str, _ := x.(string)
		out = append(out, str)
	}
	return out
}
