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
// command's arguments or a password. A line the same as one logged within libraryRepeatEvery
// is counted rather than logged, and the next time it is logged it says how many were
// (repeated): go-redis says "failed to dial" at every command while Redis is down, which
// flooded the log at the request rate (30 lines in 7 s on an idle replica) for the outage.
// The lines are told apart by their text, up to libraryRecent of them at once, so that a
// client of several servers (a Cluster's nodes down together, each its own pool) whose lines
// take turns is bounded too: a filter of the last line alone let every one of those through.
func LogLibrary(log *slog.Logger) {
	if log == nil {
		return
	}
	goredis.SetLogger(&libraryLog{log: log})
}

// libraryRepeatEvery is how often, at most, the same go-redis line is logged again.
const libraryRepeatEvery = 10 * time.Second

// libraryRecent is how many distinct lines libraryLog keeps track of: a Cluster's primaries
// and replicas each have a pool with lines of its own. Past it, the line logged longest ago is
// forgotten, and logged again at once the next time it comes.
const libraryRecent = 32

// libraryLog is go-redis's logging interface over a slog.Logger. Its repeat filter is not a
// logthrottle.Gate: a Gate bounds one failure whose caller sees it begin and end, and logs its
// end; here the lines are known only by their text, and go-redis never says that its trouble is
// over, so there is no end to log.
type libraryLog struct {
	log *slog.Logger

	mu     sync.Mutex
	recent map[string]*libraryLine // by text, at most libraryRecent
}

// libraryLine is a line libraryLog logged: when, and how often it came again since, not logged.
type libraryLine struct {
	at       time.Time
	repeated int
}

func (l *libraryLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	line := strings.TrimSpace(fmt.Sprintf(format, v...))
	now := time.Now()
	l.mu.Lock()
	if l.recent == nil {
		l.recent = map[string]*libraryLine{}
	}
	seen := l.recent[line]
	if seen != nil && now.Sub(seen.at) < libraryRepeatEvery {
		seen.repeated++
		l.mu.Unlock()
		return
	}
	repeated := 0
	if seen != nil {
		repeated = seen.repeated
		seen.at, seen.repeated = now, 0
	} else {
		if len(l.recent) >= libraryRecent {
			l.forgetOldest()
		}
		l.recent[line] = &libraryLine{at: now}
	}
	l.mu.Unlock()
	if repeated > 0 {
		l.log.WarnContext(ctx, "redis client", "line", line, "repeated", repeated)
		return
	}
	l.log.WarnContext(ctx, "redis client", "line", line)
}

// forgetOldest drops the line logged longest ago; l.mu is held. A scan of at most
// libraryRecent entries, on a line that is logged: never on the filtered path.
func (l *libraryLog) forgetOldest() {
	var oldest string
	var at time.Time
	for line, seen := range l.recent {
		if oldest == "" || seen.at.Before(at) {
			oldest, at = line, seen.at
		}
	}
	delete(l.recent, oldest)
}
