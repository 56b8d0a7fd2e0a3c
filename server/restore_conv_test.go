package server_test

import (
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestRestartForgetsAConversationItCannotRestoreWhole: Redis in the memory-only mode restarts
// (SIGKILL: every key is gone) while the second ask of a conversation runs. The runner restores
// its ticket, ended error{interrupted}, but not the conversation: its first turn went with the
// restart, and a conversation re-created around the restored turn alone was asked in again
// (202) with that turn missing, so the model answered the follow-up without the context the
// caller had given it ("that team" from a first turn it no longer saw). Found by a black-box
// probe of two replicas on redis-server. The conversation is gone, as the restart's others are:
// 404 "lost", to its owner and to anyone else alike. A conversation whose first ask was the one
// running lost nothing else, and is still restored with its turn (TestRestartLosesEverything).
// The restored ticket, to anyone but its owner, is as lost as any other id of its generation.
func TestRestartForgetsAConversationItCannotRestoreWhole(t *testing.T) {
	srv := redistest.Start(t)
	st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "wipedconv:" + rand.Text() + ":", Lease: 5 * time.Second})
	mid, resume := make(chan string, 1), make(chan struct{})
	ended := make(chan server.End, 4)
	h := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 2, mid, resume),
		Hooks: server.Hooks{Ended: func(_ string, e server.End) { ended <- e }}})
	first := newHarness(t, server.Options{Store: st})
	conv := first.conv(alice)
	checkLifecycle(t, first.events(alice, first.ask(alice, conv, "Which team had the most incidents in 2026-Q3?")), gen.EventTypeAnswer)
	ticket := h.ask(alice, conv, "How many sev1 incidents did that team have in 2026-Q3?")
	within(t, mid, "the second ask's first steps")

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(resume)
	select {
	case e := <-ended:
		if !e.Restored {
			t.Fatalf("the run's end %+v, want it restored", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the ask running across the restart was not restored within 20s")
	}
	if r := h.status(alice, ticket); r.StatusCode() != http.StatusOK || r.JSON200 == nil || r.JSON200.State != gen.AskStateError {
		t.Fatalf("the restored ticket: %d %s, want state error", r.StatusCode(), r.Body)
	}
	// Someone else's restored ticket answers as an id of the same generation that names
	// nothing: bob was answered the plain 404 at once for alice's, and 404 "lost" after the
	// rereads for a made-up one, so the difference told him her ticket survived the restart.
	gen, rest, _ := strings.Cut(strings.TrimPrefix(ticket, "t_"), "-")
	madeUp := "t_" + gen + "-" + strings.Repeat("A", 26) + rest[26:]
	for _, tk := range []string{ticket, madeUp} {
		r := h.status(bob, tk)
		p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusNotFound)
		if p.Detail == nil || !strings.HasPrefix(*p.Detail, "lost") {
			t.Errorf("bob's status of %s (alice's restored ticket: %v): %d %s, want 404 lost", tk, tk == ticket, r.StatusCode(), r.Body)
		}
	}
	for _, tok := range []string{alice, bob} {
		r := first.askRaw(tok, conv, "How many deployments did that team ship in 2026-Q3?")
		p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusNotFound)
		if p.Detail == nil || !strings.HasPrefix(*p.Detail, "lost") {
			t.Errorf("a follow-up in the conversation whose first turn the restart lost: %d %s, want 404 lost", r.StatusCode(), r.Body)
		}
	}
}
