package obs

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// askState is what obs keeps of one ask admitted by this instance, from admission to the end
// of its log. It never holds the question or the token.
type askState struct {
	ticket, conv, oid, requestID string
	admitted                     time.Time
	span                         trace.Span

	mu        sync.Mutex
	appended  int           // events in the log (accepted included), for counting evictions
	dropped   int           // step events evicted
	finishing bool          // this instance is ending the log: a finished read is not "ended elsewhere"
	modelTime time.Duration // spent waiting on model calls
	toolTime  time.Duration // spent in tool calls, as the steps report it
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

// admitted registers a ticket the store has just created, and starts its span: the ask's
// trace begins at admission, as a child of the caller's trace context when the request
// carried one.
func (o *Observer) admitted(ctx context.Context, nt store.NewTicket, start time.Time) {
	_, span := o.tracer.Start(ctx, "ask", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ask.ticket", nt.ID), attribute.String("ask.conversation", nt.ConversationID)))
	a := &askState{
		ticket: nt.ID, conv: nt.ConversationID, oid: nt.Owner.OID, requestID: RequestID(ctx),
		admitted: nt.CreatedAt, span: span, appended: 1,
	}
	if a.admitted.IsZero() {
		a.admitted = start
	}
	if a.requestID != "" {
		span.SetAttributes(attribute.String("ask.request_id", a.requestID))
	}
	o.mu.Lock()
	o.asks[nt.ID] = a
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

// appended counts events added to a ticket's log, and the step events the store evicted to
// make room: only steps are evicted, one per event beyond the bound.
func (o *Observer) appended(ticket string, evs []store.Event) {
	for _, ev := range evs {
		o.m.events.WithLabelValues(string(ev.Type)).Inc()
	}
	a := o.lookup(ticket)
	if a == nil {
		return
	}
	a.mu.Lock()
	before := a.appended
	a.appended += len(evs)
	over := a.appended - max(before, o.maxEvents)
	if over > 0 {
		a.dropped += over
	}
	a.mu.Unlock()
	if over > 0 {
		o.m.stepsDropped.Add(float64(over))
	}
}

// markFinishing tells the state that this instance is ending the log now.
func (o *Observer) markFinishing(ticket string, on bool) {
	if a := o.lookup(ticket); a != nil {
		a.mu.Lock()
		a.finishing = on
		a.mu.Unlock()
	}
}

// tailSummary is what the end of a log says: the terminal event's type (and, for an error, its
// kind) and done's figures.
type tailSummary struct {
	outcome string
	kind    string
	done    gen.DoneBody
	hasDone bool
}

func summarize(tail []store.Event) tailSummary {
	var s tailSummary
	for _, ev := range tail {
		switch {
		case ev.Terminal():
			s.outcome = string(ev.Type)
			if ev.Type == gen.EventTypeError {
				var e struct {
					Kind string `json:"kind"`
				}
				if json.Unmarshal(ev.Data, &e) == nil {
					s.kind = boundedKind(e.Kind)
				}
			}
		case ev.Type == gen.EventTypeDone:
			if json.Unmarshal(ev.Data, &s.done) == nil {
				s.hasDone = true
			}
		}
	}
	return s
}

// boundedKind keeps an error kind label within the contract's set.
func boundedKind(k string) string {
	switch gen.ErrorKind(k) {
	case gen.ErrorKindCancelled, gen.ErrorKindTimeout, gen.ErrorKindTransport, gen.ErrorKindModel,
		gen.ErrorKindInternal, gen.ErrorKindShutdown, gen.ErrorKindInterrupted:
		return k
	}
	return "other"
}

// finished records a log ended with tail, by this instance: the outcome counted once, the
// ask's span ended and, for an ask admitted here, its one log line.
func (o *Observer) finished(ticket string, tail []store.Event) {
	o.appended(ticket, tail)
	s := summarize(tail)
	if s.outcome == "" { // not a tail the service writes; count nothing, keep nothing
		o.abandon(ticket, "no_terminal")
		return
	}
	o.m.asks.WithLabelValues(s.outcome, s.kind).Inc()
	elapsed := time.Duration(s.done.ElapsedMs) * time.Millisecond
	a, ok := o.remove(ticket)
	if ok && !s.hasDone {
		elapsed = time.Since(a.admitted)
	}
	o.m.askDuration.WithLabelValues(s.outcome).Observe(elapsed.Seconds())
	if !ok {
		return // admitted by another replica, ended here (a cancel, a lapsed lease)
	}
	a.mu.Lock()
	modelTime, toolTime, dropped := a.modelTime, a.toolTime, a.dropped
	a.mu.Unlock()
	a.span.SetAttributes(
		attribute.String("ask.outcome", s.outcome), attribute.Int64("ask.steps", s.done.Steps),
		attribute.Int64("ask.model_calls", s.done.ModelCalls), attribute.Int64("ask.input_tokens", s.done.InputTokens),
		attribute.Int64("ask.output_tokens", s.done.OutputTokens))
	if s.kind != "" {
		a.span.SetAttributes(attribute.String("ask.error_kind", s.kind))
		if s.kind != string(gen.ErrorKindCancelled) {
			a.span.SetStatus(codes.Error, s.kind)
		}
	}
	a.span.End()
	o.log.Info("ask finished",
		"ticket", a.ticket, "conversation", a.conv, "oid", a.oid, "request_id", a.requestID,
		"trace_id", traceID(a.span), "outcome", s.outcome, "error_kind", s.kind,
		"steps", s.done.Steps, "steps_dropped", dropped, "model_calls", s.done.ModelCalls,
		"input_tokens", s.done.InputTokens, "output_tokens", s.done.OutputTokens,
		"elapsed_ms", elapsed.Milliseconds(), "model_ms", modelTime.Milliseconds(), "tool_ms", toolTime.Milliseconds())
}

// endedElsewhere records that another replica ended the log of an ask this instance admitted
// (its cancel, or its finding this replica's lease lapsed): that replica counted the outcome;
// here the span ends and the line says so.
func (o *Observer) endedElsewhere(ticket string) {
	if a := o.lookup(ticket); a != nil {
		a.mu.Lock()
		finishing := a.finishing
		a.mu.Unlock()
		if !finishing {
			o.abandon(ticket, "ended_elsewhere")
		}
	}
}

// abandon forgets an ask whose end this instance will not see (outcome says why), ending its
// span and writing its line without the figures only done carries.
func (o *Observer) abandon(ticket, outcome string) {
	a, ok := o.remove(ticket)
	if !ok {
		return
	}
	a.span.SetAttributes(attribute.String("ask.outcome", outcome))
	if outcome != "ended_elsewhere" {
		a.span.SetStatus(codes.Error, outcome)
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
