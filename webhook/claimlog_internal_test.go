package webhook

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/store"
)

// downOutbox is an outbox whose claims fail while down is set, as a Redis that is away.
type downOutbox struct {
	store.Outbox
	down atomic.Bool
}

func (o *downOutbox) ClaimWebhooks(ctx context.Context, holder string, hold time.Duration, n int) ([]store.Webhook, error) {
	if o.down.Load() {
		return nil, errors.New("redis store: store: unavailable: connection refused")
	}
	return o.Outbox.ClaimWebhooks(ctx, holder, hold, n)
}

// TestClaimsFailingLogBounded: claims the store does not answer, at every poll for three
// minutes, are three warn lines (one a minute), not one a poll (180), and the store's return is
// one info line.
func TestClaimsFailingLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := &downOutbox{Outbox: store.NewMemoryOutbox()}
		ob.down.Store(true)
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&lockedBuffer{b: &buf}, nil))
		cfg := Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}, Poll: time.Second}
		d, err := New(Options{Config: cfg, Outbox: ob, Tickets: finished{}, Transport: &scripted{t: t}, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		time.Sleep(3*time.Minute - time.Millisecond)
		ob.down.Store(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		cancel()
		<-done

		got := buf.String()
		if n := strings.Count(got, `"msg":"webhooks not claimed"`); n != 3 {
			t.Errorf("%d 'webhooks not claimed' lines over three minutes of failed polls, want 3:\n%s", n, got)
		}
		if n := strings.Count(got, `"msg":"webhooks claimed again"`); n != 1 {
			t.Errorf("%d 'webhooks claimed again' lines, want 1:\n%s", n, got)
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for the deliverer's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
