package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/internal/loopback"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestContractSentinel runs the store contract, and the outbox's, through a redis+sentinel://
// URL: a real Sentinel naming a real primary, which has a replica. (A failover in the middle of
// a run is server's TestSentinelFailoverMidRun.)
func TestContractSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and a Sentinel")
	}
	sen := redistest.StartSentinel(t)
	open := func(t *testing.T, o redisstore.Options) *redisstore.Store {
		o.URL, o.Prefix = sen.URL(), "sen:"+rand.Text()+":"
		s, err := redisstore.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
			return open(t, redisstore.Options{MaxEvents: o.MaxEvents})
		})
	})
	t.Run("Outbox", func(t *testing.T) { storetest.Outbox(t, open(t, redisstore.Options{})) })
}

// TestSentinelSwitchMovesNotifications: when the Sentinel moves the primary, a store opened
// from a redis+sentinel:// URL moves its change notifications' subscription to the new
// primary. go-redis moves its pooled connections but not a subscription, and the old primary,
// alive and not yet turned into a replica (that takes the Sentinel 10–15 s here), would hold
// it deaf to what the other replicas publish on the new one. A reader waiting across the
// switch is woken (what was published meanwhile is not replayed, so it must read again), and
// a change another replica then makes on the new primary reaches a reader's Changed. What
// go-redis itself says of the switch reaches the service's log as a record (LogLibrary), not as
// a plain line on stderr.
func TestSentinelSwitchMovesNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and a Sentinel")
	}
	var logs logtest.Buffer
	redisstore.LogLibrary(slog.New(slog.NewJSONHandler(&logs, nil)).With("component", "go-redis"))
	t.Cleanup(logging.Enable) // go-redis's own default: its lines on stderr
	sen := redistest.StartSentinel(t)
	ctx := t.Context()
	prefix := "switch:" + rand.Text() + ":"
	open := func(o redisstore.Options) *redisstore.Store {
		o.Prefix = prefix
		s, err := redisstore.New(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a := open(redisstore.Options{URL: sen.URL(), Replica: "a"})
	b := open(redisstore.Options{URL: sen.URL(), Replica: "b"}) // the reader

	conv, t1 := storetest.ID(a, storetest.Alice, "c1"), storetest.ID(a, storetest.Alice, "t1")
	storetest.MustConv(t, a, conv, storetest.Alice)
	if _, err := storetest.NewTicket(t, a, t1, conv, storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	before, err := b.Read(ctx, t1, 1)
	if err != nil || before.Changed == nil {
		t.Fatalf("read before the switch: %v", err)
	}
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	primary, err := sen.Failover(fctx)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, before.Changed, "a read's Changed across the primary's switch")

	// Another replica, on the new primary itself, runs a ticket; b reads it and waits.
	direct := goredis.NewClient(&goredis.Options{Addr: primary.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	c := open(redisstore.Options{Client: direct, Replica: "c"})
	conv2, t2 := storetest.ID(c, storetest.Bob, "c2"), storetest.ID(c, storetest.Bob, "t2")
	storetest.MustConv(t, c, conv2, storetest.Bob)
	if _, err := storetest.NewTicket(t, c, t2, conv2, storetest.Bob, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	// b's pooled connections move when go-redis hears +switch-master: until then its read may
	// reach the old primary, which has no t2.
	var waiting store.Batch
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-tick.C {
		if waiting, err = b.Read(ctx, t2, 1); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || waiting.Changed == nil {
		t.Fatalf("b reading c's ticket on the new primary: %v", err)
	}
	if _, err := c.AppendBatch(ctx, t2, storetest.Evs(2, 1, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, waiting.Changed, "a read's Changed after another replica appended on the new primary")
	got, err := b.Read(ctx, t2, 1)
	if err != nil || len(got.Events) != 1 || got.Events[0].Seq != 2 {
		t.Fatalf("b reads %v, %v; want the step at seq 2", got.Events, err)
	}
	// go-redis logs the switch as it moves its pool, which b's reads above waited for.
	for deadline := time.Now().Add(10 * time.Second); !hasClientRecord(logs.String(), "sentinel: new master=", primary.Addr); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("no go-redis record of the switch to %s in the log:\n%s", primary.Addr, logs.String())
		}
	}
}

// hasClientRecord reports whether the JSON log out holds a go-redis Warn record (LogLibrary's,
// under the component the test gave it) whose line starts with prefix and names addr.
func hasClientRecord(out, prefix, addr string) bool {
	for line := range strings.Lines(out) {
		var r struct{ Level, Msg, Component, Line string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Level == "WARN" && r.Msg == "redis client" && r.Component == "go-redis" &&
			strings.HasPrefix(r.Line, prefix) && strings.Contains(r.Line, addr) {
			return true
		}
	}
	return false
}

// TestSentinelStartNamesTheCause: a Sentinel URL on which no primary can be found fails New with
// the cause: a master name no Sentinel monitors, or Sentinels that do not answer, naming them.
// go-redis words the first "all sentinels specified in configuration are unreachable: redis:
// nil" (an audit read it as Sentinels down) and the second as the dial's deadline.
func TestSentinelStartNamesTheCause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and a Sentinel")
	}
	sen := redistest.StartSentinel(t)
	wrong := strings.TrimSuffix(sen.URL(), "/ask") + "/nosuch"
	_, err := redisstore.New(t.Context(), redisstore.Options{URL: wrong})
	if err == nil || !strings.Contains(err.Error(), `no Sentinel monitors a primary named "nosuch"`) || strings.Contains(err.Error(), "unreachable") {
		t.Errorf("a master name no Sentinel monitors: %v", err)
	}
	gone := loopback.Refused(t) // nothing listens there
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = redisstore.New(ctx, redisstore.Options{URL: "redis+sentinel://" + gone + "/ask"})
	if err == nil || !strings.Contains(err.Error(), "no Sentinel of the URL answered") || !strings.Contains(err.Error(), gone) {
		t.Errorf("no Sentinel answering: %v", err)
	}
}
