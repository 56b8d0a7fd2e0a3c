package obs

import (
	"log/slog"

	"go.opentelemetry.io/otel"
)

// LogLibrary sends OpenTelemetry's own errors (a batch of spans the collector did not take, a
// span queue that overflowed) to log, as Warn records with the constant message
// "opentelemetry" and the error in the attribute err. Left to itself the SDK prints them as
// plain text on the process's stderr, beside the service's structured records, where a log
// pipeline cannot parse them. The handler is one per process, so this is the composition
// root's call, once; nil changes nothing. The SDK's errors name the collector's address and
// what failed, never a span's attributes or the exporter's headers.
func LogLibrary(log *slog.Logger) {
	if log == nil {
		return
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "err", err.Error())
	}))
}
