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
