package redis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestLibraryLogRepeatsBounded: go-redis's same line over and over (a pool that cannot dial,
// at every command while Redis is down) is logged once per libraryRepeatEvery, counting the
// ones it did not log; another line is logged at once.
func TestLibraryLogRepeatsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := &libraryLog{log: slog.New(slog.NewJSONHandler(&buf, nil))}
		const dial = "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:6379: connect: connection refused"
		for range 250 { // 25 s at 10 a second
			l.Printf(t.Context(), "%s", dial)
			time.Sleep(100 * time.Millisecond)
		}
		l.Printf(t.Context(), "sentinel: new master=%q addr=%q", "ask", "127.0.0.1:6380")

		var got []string
		for line := range strings.Lines(buf.String()) {
			var r struct {
				Line     string
				Repeated int
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s repeated=%d", strings.SplitN(r.Line, ":", 2)[0], r.Repeated))
		}
		want := []string{"redis repeated=0", "redis repeated=99", "redis repeated=99", "sentinel repeated=0"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("lines:\n%s\nwant:\n%s\nthe log:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), buf.String())
		}
	})
}

// TestLibraryLogTakingTurnsBounded: the lines of several pools that cannot dial (a Cluster's
// nodes down together), each coming in turn, are each bounded as one line alone is; a filter
// of the last line only logged every one of them.
func TestLibraryLogTakingTurnsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := &libraryLog{log: slog.New(slog.NewJSONHandler(&buf, nil))}
		const dial = "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:%d: connect: connection refused"
		for i := range 150 { // 15 s at 10 a second, three nodes in turn
			l.Printf(t.Context(), dial, 7000+i%3)
			time.Sleep(100 * time.Millisecond)
		}
		got := map[string][]int{}
		for line := range strings.Lines(buf.String()) {
			var r struct {
				Line     string
				Repeated int
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			got[r.Line] = append(got[r.Line], r.Repeated)
		}
		if len(got) != 3 {
			t.Fatalf("%d distinct lines logged, want 3:\n%s", len(got), buf.String())
		}
		for line, reps := range got {
			// Each node's line came every 300 ms for 15 s: logged at 0 s and at 10.2 s, the
			// second time counting the 33 in between.
			if fmt.Sprint(reps) != "[0 33]" {
				t.Errorf("%s logged with repeated %v, want [0 33]", line, reps)
			}
		}
	})
}

// TestLibraryLogForgetsPastItsBound: past libraryRecent distinct lines, the one logged longest
// ago is forgotten (logged again at once), and the filter holds no more than libraryRecent.
func TestLibraryLogForgetsPastItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := &libraryLog{log: slog.New(slog.NewJSONHandler(&buf, nil))}
		for i := range libraryRecent + 1 {
			l.Printf(t.Context(), "line %d", i)
			time.Sleep(time.Millisecond)
		}
		if n := len(l.recent); n != libraryRecent {
			t.Errorf("%d lines kept, want %d", n, libraryRecent)
		}
		before := strings.Count(buf.String(), "\n")
		l.Printf(t.Context(), "line %d", 1) // kept: filtered
		l.Printf(t.Context(), "line %d", 0) // forgotten: logged again
		if n := strings.Count(buf.String(), "\n") - before; n != 1 || !strings.Contains(buf.String()[len(buf.String())-60:], `"line":"line 0"`) {
			t.Errorf("after the bound, %d lines logged, want line 0's alone:\n%s", n, buf.String())
		}
	})
}
