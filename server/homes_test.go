package server_test

import (
	"crypto/rand"
	"net/http"
	"regexp"
	"testing"

	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestHomedIDs: over a Redis store whose keys spread over buckets, the ids the service mints
// end with the owner's home; the owner finds its ticket and conversation by id alone, on any
// replica; another identity gets the same 404 for them as for an id that never existed.
func TestHomedIDs(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "homes:" + rand.Text() + ":"
	open := func() *redisstore.Store {
		s, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: prefix, Buckets: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a := newHarness(t, server.Options{Store: open()})
	b := newHarness(t, server.Options{Store: open()})
	cid := a.conv(alice)
	ticket := a.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
	homed := regexp.MustCompile(`^[ct]_[A-Za-z0-9]+-[A-Z2-7]{26}-b([0-9]|1[0-5])$`)
	for _, id := range []string{cid, ticket} {
		if !homed.MatchString(id) {
			t.Errorf("id %q does not end with its owner's home", id)
		}
	}
	if cid[len(cid)-3:] != ticket[len(ticket)-3:] {
		t.Errorf("one owner's conversation %s and ticket %s in different homes", cid, ticket)
	}
	if r := b.status(alice, ticket); r.StatusCode() != http.StatusOK {
		t.Errorf("the owner's ticket on another replica: %d %s", r.StatusCode(), r.Body)
	}
	if r := b.askRaw(bob, cid, "How many sev1 incidents did we have in 2026-Q2?"); r.StatusCode() != http.StatusNotFound {
		t.Errorf("another identity's ask in the owner's conversation: %d %s", r.StatusCode(), r.Body)
	}
	theirs := b.status(bob, ticket)
	never := b.status(bob, ticket[:len(ticket)-8]+"AAAAA-b3")
	if theirs.StatusCode() != http.StatusNotFound || never.StatusCode() != http.StatusNotFound || string(theirs.Body) != string(never.Body) {
		t.Errorf("another identity's ticket: %d %s; a ticket that never was: %d %s; want the same 404",
			theirs.StatusCode(), theirs.Body, never.StatusCode(), never.Body)
	}
}
