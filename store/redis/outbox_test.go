package redis_test

import (
	"testing"

	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestOutboxContract runs the webhook outbox contract against Redis.
func TestOutboxContract(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Outbox(t, newStore(t, srv, redisstore.Options{}))
}
