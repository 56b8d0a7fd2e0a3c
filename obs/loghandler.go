package obs

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that every record logged with a context (InfoContext and the like)
// carries the request id and the trace id found there: request_id (see Handler) and trace_id
// (of the span in the context, when there is a valid one), and, logged with a run's context
// (Hooks' Running), the ask's ticket, unless the record names one itself: a model adapter's
// `model call failed` knows no ticket. Records logged without a context, or whose context has
// none of them, pass through unchanged.
func LogHandler(h slog.Handler) slog.Handler { return ctxHandler{Handler: h} }

type ctxHandler struct {
	slog.Handler
	// named: the logger names a ticket itself (With("ticket", …)), or nests its attributes in
	// a group, where a ticket added to the record would not sit beside the others
	named bool
}

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if id := RequestID(ctx); id != "" {
			r.AddAttrs(slog.String("request_id", id))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
		}
		if a := askFrom(ctx); a != nil && !h.named && !hasAttr(r, "ticket") {
			r.AddAttrs(slog.String("ticket", a.ticket))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h ctxHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	named := h.named
	for _, a := range attrs {
		named = named || a.Key == "ticket"
	}
	return ctxHandler{Handler: h.Handler.WithAttrs(attrs), named: named}
}

func (h ctxHandler) WithGroup(name string) slog.Handler {
	return ctxHandler{Handler: h.Handler.WithGroup(name), named: h.named || name != ""}
}

// hasAttr reports whether r carries an attribute named key.
func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
