package obs

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// Handler wraps the API. Every request gets an id (X-Request-Id: the caller's when
// well-formed, else a new one; echoed on the response and put in the request's context, where
// the ask's span and log line find it) and continues the caller's W3C trace context
// (traceparent), so an ask's trace can start in its client. It counts requests by route and
// status, refused admissions by reason, time to ticket, open streams and reconnects, and
// writes one "request" line per request (method, as the metric names it: GET, POST, HEAD,
// OPTIONS or other; route template, status, duration: never a path value, a body or a header).
func (o *Observer) Handler(next http.Handler) http.Handler {
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := requestID(r.Header)
		w.Header().Set(HeaderRequestID, id)
		refused := new(refusalNote)
		ctx := context.WithValue(r.Context(), requestIDKey{}, id)
		ctx = context.WithValue(ctx, refusalKey{}, refused)
		ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		route := routeOf(r)

		streaming := false
		rec := &recorder{ResponseWriter: w}
		rec.onHeader = func(status int) {
			switch {
			case route == routeCreateAsk && status == http.StatusAccepted:
				o.m.timeToTicket.Observe(time.Since(start).Seconds())
			case route == routeStream && status == http.StatusOK && r.Method != http.MethodHead: // a HEAD opens no stream
				streaming = true
				o.m.streamsOpen.Inc()
				if r.Header.Get("Last-Event-ID") != "" || r.URL.Query().Has("after") {
					o.m.reconnects.Inc()
				}
			}
		}
		defer func() {
			if streaming {
				o.m.streamsOpen.Dec()
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			method := methodLabel(r.Method) // the log line's too: a caller's method is any token, of any length
			o.m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
			if route == routeCreateConversation || route == routeCreateAsk {
				if reason := refused.reason(status); reason != "" {
					o.m.refusals.WithLabelValues(route, reason).Inc()
				}
			}
			o.log.Info("request", "request_id", id, "method", method, "route", route, "status", status,
				"ms", time.Since(start).Milliseconds())
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// refusalNote is where Hooks.Refused leaves the service's reason for refusing a request, for
// the request's count in ask_admission_refusals_total.
type refusalNote struct {
	mu    sync.Mutex
	named string
}

type refusalKey struct{}

// refused is Hooks.Refused: the service names why it refuses the request in ctx.
func (o *Observer) refused(ctx context.Context, reason string) {
	if n, ok := ctx.Value(refusalKey{}).(*refusalNote); ok {
		n.mu.Lock()
		n.named = reason
		n.mu.Unlock()
	}
}

// reason is the refusal's reason: the service's, when it named one, else the status's.
func (n *refusalNote) reason(status int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.named != "" && status >= 400 {
		return n.named
	}
	return refusalReason(status)
}

// recorder notes the status of a response and when its header was written. It keeps
// flushing working for streams (FlushError, and Unwrap for http.ResponseController).
type recorder struct {
	http.ResponseWriter
	status   int
	onHeader func(status int)
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
		w.onHeader(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes the underlying writer (http.ResponseController finds it).
func (w *recorder) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is http.Flusher, for code that asserts it rather than using a ResponseController.
func (w *recorder) Flush() { _ = w.FlushError() }

// Unwrap gives http.ResponseController the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
