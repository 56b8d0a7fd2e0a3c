package redis

import (
	"context"

	"github.com/das-ask/ask/store"
)

// Renew implements store.Shared.
func (s *Store) Renew(ctx context.Context, ticket string, u store.Usage) error {
	res, err := renew.Run(ctx, s.rdb, []string{s.keys.ticket(ticket), s.keys.running()},
		s.replica, ms(s.lease), ticket, u.ModelCalls, u.InputTokens, u.OutputTokens).Text()
	if err != nil {
		return wrap(err)
	}
	return statusErr(res)
}

// Lapsed implements store.Shared.
func (s *Store) Lapsed(ctx context.Context, limit int) ([]string, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := lapsed.Run(ctx, s.rdb, []string{s.keys.running()}, s.keys.ticketPrefix(), limit).StringSlice()
	if err != nil {
		return nil, wrap(err)
	}
	return ids, nil
}

// Usage implements store.Shared.
func (s *Store) Usage(ctx context.Context, ticket string) (store.Usage, error) {
	v, err := s.rdb.HMGet(ctx, s.keys.ticket(ticket), "steps", "model_calls", "in", "out").Result()
	if err != nil {
		return store.Usage{}, wrap(err)
	}
	n := make([]int64, len(v))
	for i, x := range v {
		if x == nil {
			return store.Usage{}, store.ErrNotFound
		}
		str, _ := x.(string)
		n[i] = atoi(str)
	}
	return store.Usage{Steps: n[0], ModelCalls: n[1], InputTokens: n[2], OutputTokens: n[3]}, nil
}
