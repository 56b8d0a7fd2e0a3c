package app

import (
	"io"
	"log/slog"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/obs"
)

// NewLogger is askd's logger as ops configures it (JSON or text, at its level), writing to w.
// A line logged with a request's context names its request and trace ids (obs.LogHandler).
func NewLogger(ops config.OpsConfig, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: ops.LogLevel}
	if ops.LogFormat == "text" {
		return slog.New(obs.LogHandler(slog.NewTextHandler(w, hopts)))
	}
	return slog.New(obs.LogHandler(slog.NewJSONHandler(w, hopts)))
}
