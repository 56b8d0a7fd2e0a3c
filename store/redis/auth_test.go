package redis_test

import (
	"errors"
	"testing"

	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestRedisWhosePasswordChanged: a Redis restarted (or reconfigured) with a password the store
// was not given refuses every new connection with NOAUTH. That is the store unavailable — the
// service answers 503 with Retry-After and /readyz fails — not a fault of the request, which
// the service answered 500 for. Found by a black-box audit: a create answered 500 once Redis's
// password changed.
func TestRedisWhosePasswordChanged(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.Options{})
	c := raw(t, srv)
	ctx := t.Context()
	storetest.MustConv(t, s, "c1", storetest.Alice)

	if err := c.ConfigSet(ctx, "requirepass", "not-the-store's").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The client that set it is still authenticated (AUTH is per connection); put it back
		// so that the server stops cleanly with the test.
		_ = c.Do(ctx, "AUTH", "not-the-store's").Err()
		_ = c.ConfigSet(ctx, "requirepass", "").Err()
	})
	// Every connection the store holds is closed, as a restart would: the next ones meet the password.
	if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	err := s.CreateConversation(ctx, store.Conversation{ID: "c2", Owner: storetest.Alice}, store.Limits{})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("CreateConversation on a Redis asking a password the store lacks: %v, want store.ErrUnavailable", err)
	}
	if _, _, err := s.Conversation(ctx, "c1"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Conversation on a Redis asking a password the store lacks: %v, want store.ErrUnavailable", err)
	}
}
