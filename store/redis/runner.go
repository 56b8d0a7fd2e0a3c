package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// Runner is the name of the instance that runs ticket (its Replica), as the ticket records it:
// the one that created it. It is for operators and test harnesses (cmd/ask-cluster finds the
// replica to kill by it); the service itself never asks. An unknown ticket is
// store.ErrNotFound.
func (s *Store) Runner(ctx context.Context, ticket string) (string, error) {
	return s.field(ctx, s.keys.ticket(s.keys.bucketOf(ticket), ticket), "runner")
}

// WebhookHolder is the instance (its Replica) holding ticket's webhook delivery claim, "" when
// none holds it: for test harnesses that kill the delivering replica (cmd/ask-cluster). A
// ticket without a delivery is store.ErrNotFound.
func (s *Store) WebhookHolder(ctx context.Context, ticket string) (string, error) {
	return s.field(ctx, s.keys.webhook(s.keys.bucketOf(ticket), ticket), "holder")
}

// field reads one field of a hash the store keeps; a missing hash is store.ErrNotFound.
func (s *Store) field(ctx context.Context, key, name string) (string, error) {
	v, err := s.rdb.HGet(ctx, key, name).Result()
	if errors.Is(err, goredis.Nil) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", wrap(err)
	}
	return v, nil
}
