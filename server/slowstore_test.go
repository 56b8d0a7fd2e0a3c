package server_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestStreamThroughASlowStore: a Redis that answers every call, only more slowly than half the
// keep-alive interval (a busy or distant Redis: here each chunk is delayed on its way, so a read
// takes about four times the bound), must still deliver a stream. Each read was cancelled at
// its bound (half the keep-alive interval, so that keep-alives go on through a stalled read)
// and started again from nothing, so no read ever finished: a black-box probe (keep-alive 2 s,
// Redis 1.4 s away) read a finished ask's stream for 25 s and was sent keep-alives only, while
// its status and every write were answered.
func TestStreamThroughASlowStore(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "slowstore:" + rand.Text() + ":"
	st, p := redistest.StoreBehindProxy(t, srv, redisstore.Options{Prefix: prefix})
	const keepAlive = 200 * time.Millisecond
	runs := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0)})
	h := newHarness(t, server.Options{Store: st, KeepAlive: keepAlive})
	ticket := runs.ask(alice, runs.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	want := runs.events(alice, ticket) // the run is over: its whole log
	if len(want) == 0 || want[len(want)-1].Event != "done" {
		t.Fatalf("the run's log: %v", types(want))
	}

	// Each chunk either way waits 100 ms: a round trip takes 200 ms or more, twice the read's
	// bound of 100 ms, and far below the Redis client's timeouts (seconds).
	p.Delay(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp := h.stream(ctx, alice, ticket, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("stream through the slow store: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var got []frame
	comments := 0
	for {
		f, err := readFrame(br)
		if err != nil {
			t.Fatalf("after %d keep-alives and events %v the stream ended (%v), want the log to done %v",
				comments, types(got), err, types(want))
		}
		if f.Comment != "" {
			comments++
			continue
		}
		got = append(got, f)
		if f.Event == "done" {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("through the slow store the stream read %v, want %v", types(got), types(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("event %d through the slow store: %d %s, want %d %s", i, got[i].ID, got[i].Data, want[i].ID, want[i].Data)
		}
	}
}
