package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// LogLibrary sends go-redis's own log lines to log, as Warn records with the constant message
// "redis client" and the line in the attribute line: a Sentinel's switch of the primary
// ("sentinel: new master=…"), a pool that cannot dial, a cluster whose slots moved. Left to
// itself go-redis prints them as plain text on the process's stderr, beside the service's
// structured records, where a log pipeline cannot parse them. go-redis has one logger per
// process, so this is the composition root's call, once; a later call replaces an earlier one,
// and nil changes nothing. go-redis's lines name addresses, master names and errors, never a
// command's arguments or a password. A line the same as the one before it within
// libraryRepeatEvery is counted rather than logged, and the next one logged says how many
// were (repeated): go-redis says "failed to dial" at every command while Redis is down, which
// flooded the log at the request rate (30 lines in 7 s on an idle replica) for the outage.
func LogLibrary(log *slog.Logger) {
	if log == nil {
		return
	}
	goredis.SetLogger(&libraryLog{log: log})
}

// libraryRepeatEvery is how often, at most, the same go-redis line is logged again.
const libraryRepeatEvery = 10 * time.Second

// libraryLog is go-redis's logging interface over a slog.Logger. Its repeat filter is not a
// logthrottle.Gate: a Gate bounds one failure whose caller sees it begin and end, and logs its
// end; here the lines are known only by their text, one differing from the last is new, and
// go-redis never says that its trouble is over, so there is no end to log.
type libraryLog struct {
	log *slog.Logger

	mu       sync.Mutex
	last     string    // the last line logged
	at       time.Time // when
	repeated int       // times last came again since, not logged
}

func (l *libraryLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	line := strings.TrimSpace(fmt.Sprintf(format, v...))
	now := time.Now()
	l.mu.Lock()
	if line == l.last && now.Sub(l.at) < libraryRepeatEvery {
		l.repeated++
		l.mu.Unlock()
		return
	}
	repeated := 0
	if line == l.last {
		repeated = l.repeated
	}
	l.last, l.at, l.repeated = line, now, 0
	l.mu.Unlock()
	if repeated > 0 {
		l.log.WarnContext(ctx, "redis client", "line", line, "repeated", repeated)
		return
	}
	l.log.WarnContext(ctx, "redis client", "line", line)
}
