package obs

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// codesError is the span status of an ask that failed.
const codesError = codes.Error

// askState is what obs keeps of one ask admitted by this instance, from admission to the end
// of its log. It never holds the question or the token.
type askState struct {
	ticket, conv, oid, requestID string
	admitted                     time.Time
	span                         trace.Span

	mu        sync.Mutex
	dropped   int           // step events evicted, as the service reports them
	modelTime time.Duration // spent waiting on model calls that returned
	// modelWaits are the starts of the model calls still waiting, keyed by call: an ask the
	// service ends while one waits (its deadline, the shutdown grace's end) has its line written
	// before the cut call returns, and that wait counts in model_ms all the same.
	modelWaits map[*time.Time]struct{}
	toolTime   time.Duration // spent in tool calls, as the steps report it
}

// askKey carries the ask's state in the run's context, for the model wrapper.
type askKey struct{}

func withAsk(ctx context.Context, a *askState) context.Context {
	return context.WithValue(ctx, askKey{}, a)
}

func askFrom(ctx context.Context) *askState {
	a, _ := ctx.Value(askKey{}).(*askState)
	return a
}

// admitted registers a ticket the service has just created, and starts its span: the ask's
// trace begins at admission, as a child of the caller's trace context when the request
// carried one.
func (o *Observer) admitted(ctx context.Context, adm server.Admission) {
	_, span := o.tracer.Start(ctx, "ask", trace.WithTimestamp(adm.CreatedAt), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ask.ticket", adm.Ticket), attribute.String("ask.conversation", adm.Conversation)))
	a := &askState{
		ticket: adm.Ticket, conv: adm.Conversation, oid: adm.OID, requestID: RequestID(ctx),
		admitted: adm.CreatedAt, span: span,
	}
	if a.admitted.IsZero() {
		a.admitted = time.Now()
	}
	if a.requestID != "" {
		span.SetAttributes(attribute.String("ask.request_id", a.requestID))
	}
	o.mu.Lock()
	o.asks[adm.Ticket] = a
	o.mu.Unlock()
	o.m.asksRunning.Inc()
	o.m.events.WithLabelValues(string(gen.EventTypeAccepted)).Inc()
}

// lookup is the state of an ask this instance admitted and has not seen end, or nil.
func (o *Observer) lookup(ticket string) *askState {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.asks[ticket]
}

// remove forgets ticket, reporting whether it was still registered (so exactly one caller
// ends its span and writes its line).
func (o *Observer) remove(ticket string) (*askState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.asks[ticket]
	if ok {
		delete(o.asks, ticket)
		o.m.asksRunning.Dec()
	}
	return a, ok
}

// boundedKind keeps an error kind label within the contract's set.
func boundedKind(k string) string {
	if slices.Contains(errorKinds, gen.ErrorKind(k)) {
		return k
	}
	return "other"
}

// errorKinds are the contract's error kinds (obs's tests hold the list to its enum): the kind
// label's values, each series made at zero when the metrics are.
var errorKinds = []gen.ErrorKind{gen.ErrorKindCancelled, gen.ErrorKindTimeout, gen.ErrorKindTransport, gen.ErrorKindModel,
	gen.ErrorKindInternal, gen.ErrorKindShutdown, gen.ErrorKindInterrupted}

// abandon forgets an ask whose end this instance will not see (outcome says why), ending its
// span and writing its line without the figures only done carries.
func (o *Observer) abandon(ticket, outcome string) {
	a, ok := o.remove(ticket)
	if !ok {
		return
	}
	a.span.SetAttributes(attribute.String("ask.outcome", outcome))
	if outcome != "ended_elsewhere" {
		a.span.SetStatus(codesError, outcome)
	}
	a.span.End()
	o.log.Info("ask finished",
		"ticket", a.ticket, "conversation", a.conv, "oid", a.oid, "request_id", a.requestID,
		"trace_id", traceID(a.span), "outcome", outcome, "elapsed_ms", time.Since(a.admitted).Milliseconds())
}

func traceID(s trace.Span) string {
	if sc := s.SpanContext(); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
