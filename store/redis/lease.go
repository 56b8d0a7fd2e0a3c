package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// Renew implements store.Shared.
func (s *Store) Renew(ctx context.Context, ticket string, u store.Usage) error {
	b := s.keys.bucketOf(ticket)
	res, err := renew.Run(ctx, s.rdb, []string{s.keys.ticket(b, ticket), s.keys.running(b)},
		s.replica, ms(s.lease), ticket, u.ModelCalls, u.InputTokens, u.OutputTokens).Text()
	if err != nil {
		return wrap(err)
	}
	err = statusErr(res)
	if errors.Is(err, store.ErrNotFound) && s.runs.endedBeforeLost(ticket) {
		err = store.ErrFinished // it ended elsewhere, then the store lost it: not restored
	}
	if errors.Is(err, store.ErrFinished) {
		// Ended elsewhere (a cancel another replica took, a lapse sweep): the run ends here
		// without an end of its own, which is where runs forgets its ticket otherwise.
		s.runs.drop(ticket)
	}
	return err
}

// Lapsed implements store.Shared: every bucket's running set, in one pipeline (on Redis
// Cluster, one round trip per node). Each bucket is answered on its own: a bucket whose node
// cannot answer now (its slot being migrated, which answers TRYAGAIN for as long as its keys
// are split between two nodes; its primary dead before its replica's election) fails with
// ErrUnavailable, and the lapsed tickets of the buckets that answered are returned with that
// error. Before, one such bucket failed the whole sweep: a dead replica's runs in every other
// bucket stayed running for as long as a slot took to migrate.
func (s *Store) Lapsed(ctx context.Context, limit int) ([]string, error) {
	if limit <= 0 {
		limit = 100
	}
	cmds := make([]*goredis.Cmd, s.keys.buckets)
	run := func(buckets []int, sha bool) {
		_, _ = s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, b := range buckets {
				keys := []string{s.keys.running(b), s.keys.tickets(b), s.keys.convs(b)}
				if sha {
					cmds[b] = lapsed.EvalSha(ctx, p, keys, s.keys.ticketPrefix(b), limit, s.keys.convPrefix(b), ms(s.recheck))
				} else {
					cmds[b] = lapsed.Eval(ctx, p, keys, s.keys.ticketPrefix(b), limit, s.keys.convPrefix(b), ms(s.recheck))
				}
			}
			return nil
		})
	}
	all := make([]int, len(cmds))
	for b := range all {
		all[b] = b
	}
	run(all, true)
	// A node that has not seen the script yet (a restart, a new node): load it there and ask
	// its buckets again.
	var unloaded []int
	for b, c := range cmds {
		if goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			unloaded = append(unloaded, b)
		}
	}
	if len(unloaded) > 0 {
		run(unloaded, false)
	}
	var ids []string
	var failed error
	for _, c := range cmds {
		got, err := c.StringSlice()
		if err != nil {
			if failed == nil {
				failed = err
			}
			continue
		}
		ids = append(ids, got...)
	}
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, wrap(failed)
}

// Usage implements store.Shared. A ticket's model calls and tokens are written by its first
// lease renewal: until then they are 0.
func (s *Store) Usage(ctx context.Context, ticket string) (store.Usage, error) {
	v, err := s.rdb.HMGet(ctx, s.keys.ticket(s.keys.bucketOf(ticket), ticket), "conv", "steps", "model_calls", "in", "out").Result()
	if err != nil {
		return store.Usage{}, wrap(err)
	}
	if v[0] == nil {
		return store.Usage{}, store.ErrNotFound
	}
	n := make([]int64, len(v))
	for i, x := range v {
		str, _ := x.(string)
		n[i] = atoi(str)
	}
	return store.Usage{Steps: n[1], ModelCalls: n[2], InputTokens: n[3], OutputTokens: n[4]}, nil
}

// RestartedWithin reports whether a Redis holding the store (every primary, on a cluster) was
// started less than d ago: one that came back from a crash may have lost its last writes, the
// ends of asks that had finished among them, and the replica that wrote them writes them again
// once it notices (server's reassert), which the lease sweep gives that long.
func (s *Store) RestartedWithin(ctx context.Context, d time.Duration) (bool, error) {
	uptime := func(ctx context.Context, c *goredis.Client) (bool, error) {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return false, wrap(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return err == nil && time.Duration(n)*time.Second < d, nil
			}
		}
		return false, nil
	}
	switch c := s.rdb.(type) {
	case *goredis.Client:
		return uptime(ctx, c)
	case *goredis.ClusterClient:
		var mu sync.Mutex
		any := false
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
			r, err := uptime(ctx, n)
			mu.Lock()
			any = any || r
			mu.Unlock()
			return err
		})
		return any, err
	}
	return false, nil
}
