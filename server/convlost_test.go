package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestConversationWhoseCreationIsUnknown: an unkeyed POST /v1/conversations whose creation
// Redis ran but whose reply never came back (the connection closed on it, or held past
// StoreWait) is answered 503, and the replica removes the conversation the store made all the
// same, once the store answers: nobody holds its id, and left alone it would sit empty until
// its TTL, counted against its owner's conversations (429 at the cap). Nothing is
// half-created by a refused request.
func TestConversationWhoseCreationIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		readTimeout, storeWait time.Duration
		then                   faultproxy.Then
	}{
		// The store client's own error (EOF, no retry) is the create's answer.
		{"reply lost", time.Second, 5 * time.Second, faultproxy.Close},
		// The reply is held: StoreWait answers first.
		{"reply past StoreWait", time.Second, 100 * time.Millisecond, faultproxy.Stall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startConvLost(t, tc.readTimeout, tc.storeWait)
			p, st, h, direct, prefix, first := u.proxy, u.st, u.h, u.direct, u.prefix, u.first
			// The creation carries bob's oid as one argument; nothing else does meanwhile.
			p.DropReplies(1, "\r\nbob\r\n", tc.then)
			r, err := h.cw.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{}, bearer(bob))
			if err != nil {
				t.Fatal(err)
			}
			problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
			if got := p.Stats().RepliesDropped; got != 1 {
				t.Fatalf("replies dropped: %d, want the creation's", got)
			}
			// Removed (so Redis had made it: the creation ran, its reply was what was lost). The
			// client's read timeout is a second, the conversation's TTL minutes: a removal before
			// then is the replica's own. The bound only turns a missing one into a failure.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if err := h.logs.WaitFor(ctx, "conversation created after its request gave up on the store: removed"); err != nil {
				t.Fatalf("the conversation made for a create answered 503 was not removed within 20 s (%v); bob holds %d in Redis\n%s",
					err, conversationsOf(t, direct, prefix, "bob"), h.logs.String())
			}
			if got := conversationsOf(t, direct, prefix, "bob"); got != 1 {
				t.Errorf("bob's conversations in Redis after the removal: %d, want 1 (%s)", got, first)
			}
			// The cap counts it no more: bob's second conversation, under a cap of two.
			r, err = h.cw.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{}, bearer(bob))
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode() != http.StatusCreated {
				t.Errorf("bob's second conversation under a cap of two: %d %s, want 201", r.StatusCode(), r.Body)
			}
			// His first is untouched.
			if _, _, err := st.Conversation(t.Context(), first); err != nil {
				t.Errorf("bob's first conversation: %v", err)
			}
		})
	}
}

// TestConversationDropEndsWithTheServer: the removal of a conversation whose creation was not
// answered is retried while the store does not answer, and no longer than the server lives:
// Shutdown returns (within the store client's read timeout), and the conversation is left to
// its TTL.
func TestConversationDropEndsWithTheServer(t *testing.T) {
	u := startConvLost(t, time.Second, 100*time.Millisecond)
	// The creation's reply and every removal's are swallowed.
	u.proxy.DropReplies(1000, "\r\nbob\r\n", faultproxy.Stall)
	r, err := u.h.cw.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{}, bearer(bob))
	if err != nil {
		t.Fatal(err)
	}
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := u.proxy.WaitStats(ctx, func(s faultproxy.Stats) bool { return s.RepliesDropped >= 2 }); err != nil {
		t.Fatalf("no removal tried within 20 s: %v\n%s", err, u.h.logs.String())
	}
	if err := u.h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a removal retrying: %v", err)
	}
	u.proxy.Disarm()
	if got := conversationsOf(t, u.direct, u.prefix, "bob"); got != 2 {
		t.Errorf("bob's conversations in Redis after Shutdown: %d, want 2 (the first, and the one left to its TTL)", got)
	}
}

// convLost is the set-up of the tests of a conversation's creation whose reply is lost: a real
// Redis behind a fault proxy, a store client that never retries (so the creation's outcome is
// its read timeout, or StoreWait), a service with the given StoreWait that lets an identity hold
// two conversations, and bob's first conversation, created (so that Redis knows the creation's
// script: a lost reply is then the creation's, not a NOSCRIPT's). direct reads Redis past the
// proxy; prefix is the store's.
type convLost struct {
	proxy  *faultproxy.Proxy
	st     *redisstore.Store
	h      *harness
	direct *goredis.Client
	prefix string
	first  string
}

func startConvLost(t *testing.T, readTimeout, storeWait time.Duration) convLost {
	t.Helper()
	srv := redistest.Start(t)
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// As the store's own client (url.go): a call ends at its context's deadline.
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: readTimeout, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	prefix := "convlost:" + rand.Text() + ":"
	st, err := redisstore.New(t.Context(), redisstore.Options{Client: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	direct := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	h := newHarness(t, server.Options{Store: st, StoreWait: storeWait, MaxConversationsPerID: 2})
	return convLost{proxy: p, st: st, h: h, direct: direct, prefix: prefix, first: h.conv(bob)}
}

// conversationsOf counts the conversation hashes under prefix that oid owns, as Redis holds
// them (a ticket's hash has no turn count).
func conversationsOf(t *testing.T, rdb *goredis.Client, prefix, oid string) int {
	t.Helper()
	n := 0
	iter := rdb.Scan(t.Context(), 0, "{"+prefix+"*", 100).Iterator() // keys.tag
	for iter.Next(t.Context()) {
		if rdb.Type(t.Context(), iter.Val()).Val() != "hash" {
			continue
		}
		v, err := rdb.HMGet(t.Context(), iter.Val(), "oid", "turns").Result()
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := v[0].(string); s == oid && v[1] != nil {
			n++
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
