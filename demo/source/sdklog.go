package source

import (
	"context"
	"log/slog"
)

// quieter passes on only records at or above min: the MCP SDK logs every session's start and
// end at Info, which drowns the source's own lines in a dev stack's terminal.
type quieter struct {
	min slog.Level
	slog.Handler
}

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= q.min && q.Handler.Enabled(ctx, l)
}

func (q quieter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quieter{q.min, q.Handler.WithAttrs(attrs)}
}

func (q quieter) WithGroup(name string) slog.Handler {
	return quieter{q.min, q.Handler.WithGroup(name)}
}
