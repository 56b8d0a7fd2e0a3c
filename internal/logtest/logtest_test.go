package logtest_test

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/das-ask/ask/internal/logtest"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Logf(string, ...any) {}

func TestAssertAbsent(t *testing.T) {
	var logs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { log.Info("line", "n", i, "tok", "tok-secret") })
	}
	wg.Wait()

	for _, c := range []struct {
		needles []string
		fails   int
	}{
		{nil, 0},
		{[]string{"question", "key"}, 0},
		{[]string{"tok-secret"}, 1},
		{[]string{"question", "tok-secret", "n=7"}, 2},
		{[]string{"tok-secret", "question", "tok-secret"}, 1}, // a needle given twice is one secret
		{[]string{"", ""}, 2},
		{[]string{""}, 1},
	} {
		r := &recorder{TB: t}
		logs.AssertAbsent(r, c.needles...)
		if len(r.errors) != c.fails {
			t.Errorf("AssertAbsent(%q): %d failures %q, want %d", c.needles, len(r.errors), r.errors, c.fails)
		}
	}
}
