// Package logtest captures what a logger writes in a test, and checks that no secret — a
// token, a question, a key — reached it.
//
// A Buffer is the io.Writer behind a slog handler of the test's choosing:
//
//	var logs logtest.Buffer
//	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
//	…
//	logs.AssertAbsent(t, token, question)
package logtest

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
)

// Buffer collects log output. It is safe for the concurrent writes of a logger; its zero value
// is empty and ready to use.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed at the next write, for WaitFor; nil while nobody waits
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.b.Write(p)
}

// WaitFor returns once what b holds contains needle, or ctx's error if ctx ends first: a test
// waits for a line a goroutine of the code under test logs, without polling.
func (b *Buffer) WaitFor(ctx context.Context, needle string) error {
	for {
		b.mu.Lock()
		if bytes.Contains(b.b.Bytes(), []byte(needle)) {
			b.mu.Unlock()
			return nil
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// String returns all that was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// AssertAbsent fails t, without stopping it, for each needle found in what b holds so far, and
// then shows the log once. An empty needle fails too: it stands in every log, so a test that
// passes one has lost the secret it meant to look for. A needle given more than once is looked
// for once (a load test's thousands of asks of one question would otherwise search the log as
// many times).
func (b *Buffer) AssertAbsent(t testing.TB, needles ...string) {
	t.Helper()
	out := b.String()
	found := false
	seen := make(map[string]bool, len(needles))
	for i, n := range needles {
		if seen[n] && n != "" {
			continue
		}
		seen[n] = true
		switch {
		case n == "":
			t.Errorf("logtest: needle %d of %d is empty", i+1, len(needles))
		case strings.Contains(out, n):
			// Only a prefix: the needle is a secret, and the test output is a log too.
			t.Errorf("the log holds a secret (%.12q…)", n)
			found = true
		}
	}
	if found {
		t.Logf("log:\n%s", out)
	}
}
