package faultproxy_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/store/redis/redistest"
)

// A lost reply, as go-redis meets it: the command ran, the client saw the connection end,
// and its default retry ran the command again. This is why every store script must give the
// same answer when re-run.
func TestRedisLostReplyRunsTwice(t *testing.T) {
	srv := redistest.Start(t)
	p := newProxy(t, srv.Addr)
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr()})
	defer rc.Close()
	ctx := t.Context()
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.DropReplies(1, "incr", faultproxy.Close) // go-redis sends command names in lower case
	n, err := rc.Incr(ctx, "counter").Result()
	if err != nil {
		t.Fatalf("INCR through a lost reply: %v (go-redis retries by default)", err)
	}
	if n != 2 {
		t.Errorf("INCR answered %d, want 2: the lost reply's INCR ran, then the retry's", n)
	}
	if st := p.Stats(); st.RepliesDropped != 1 || st.Accepted < 2 {
		t.Errorf("stats %+v, want one reply dropped and a reconnect", st)
	}
}
