package redistest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Poll waits, for at most 10 s, until cond holds, asking every 10 ms: for a state a Redis or
// a store reaches on its own (a background check, a file Redis appends to) and that sends no
// event to wait on.
func Poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 10s", what)
		case <-tick.C:
		}
	}
}

// Files returns every file under dir (a Server's Dir), concatenated: what `strings` of the AOF,
// the RDB and anything else Redis wrote would read.
func Files(t testing.TB, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		all = append(all, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}
