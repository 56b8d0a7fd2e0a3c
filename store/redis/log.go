package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// LogLibrary sends go-redis's own log lines to log, as Warn records with the constant message
// "redis client" and the line in the attribute line: a Sentinel's switch of the primary
// ("sentinel: new master=…"), a pool that cannot dial, a cluster whose slots moved. Left to
// itself go-redis prints them as plain text on the process's stderr, beside the service's
// structured records, where a log pipeline cannot parse them. go-redis has one logger per
// process, so this is the composition root's call, once; a later call replaces an earlier one,
// and nil changes nothing. go-redis's lines name addresses, master names and errors, never a
// command's arguments or a password.
func LogLibrary(log *slog.Logger) {
	if log == nil {
		return
	}
	goredis.SetLogger(libraryLog{log})
}

// libraryLog is go-redis's logging interface over a slog.Logger.
type libraryLog struct{ log *slog.Logger }

func (l libraryLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l.log.WarnContext(ctx, "redis client", "line", strings.TrimSpace(fmt.Sprintf(format, v...)))
}
