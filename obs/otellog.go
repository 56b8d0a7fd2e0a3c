package obs

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strconv"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
)

// LogLibrary sends OpenTelemetry's own errors (a batch of spans the collector did not take, a
// span queue that overflowed) to log, as Warn records with the constant message
// "opentelemetry" and the error in the attribute err, and the SDK's own log lines (a setting it
// cannot read and ignores: error level, its message as msg, never the setting's value nor a
// header's name or value) as records of log too. Left to itself the SDK prints them as
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
	otel.SetLogger(logr.FromSlogHandler(noInput{log.Handler()}))
}

// noInput drops the attributes of the SDK's lines that echo a setting it could not read:
// "input", and for OTEL_EXPORTER_OTLP_HEADERS "key" (a header name it refused, which is the
// whole credential when one is written "authorization:Bearer abc==") and "value" (a header
// value with a malformed escape): a collector's credentials.
type noInput struct{ slog.Handler }

// echoes reports whether an SDK line's attribute key holds a setting's text.
func echoes(key string) bool { return key == "input" || key == "key" || key == "value" }

// unquoted is what the SDK's error says failed, without the text it could not read, which
// its error quotes too: strconv's `parsing "…"` (a whole OTEL_EXPORTER_OTLP_TIMEOUT) and
// url's `invalid URL escape "%xx"` (two characters of a header's value). Any other error
// (a file it could not read, "missing '=") is kept as it says.
func unquoted(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + unquoted(ue.Err)
	}
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Func + ": " + ne.Err.Error()
	}
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return "invalid URL escape"
	}
	return err.Error()
}

func (h noInput) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
			a = slog.String(a.Key, unquoted(err))
		}
		if !echoes(a.Key) {
			out.AddAttrs(a)
		}
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h noInput) WithAttrs(as []slog.Attr) slog.Handler {
	kept := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if !echoes(a.Key) {
			kept = append(kept, a)
		}
	}
	return noInput{h.Handler.WithAttrs(kept)}
}

func (h noInput) WithGroup(name string) slog.Handler { return noInput{h.Handler.WithGroup(name)} }
