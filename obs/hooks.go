package obs

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// Hooks attaches the observer to a service (server.Options.Hooks): the ask's span and state
// from admission, its tool calls as the run appends their steps, evicted steps as the service
// reports them, its end, with the typed done, as one `ask finished` line, and the cause of a
// refusal whose status several causes share (for Handler's ask_admission_refusals_total).
// Asks another replica admitted and this one ended (a cancel, a lapsed lease) count towards
// the outcome metrics here, and their line (admitted_elsewhere) is written here too.
func (o *Observer) Hooks() server.Hooks {
	return server.Hooks{Admitted: o.admitted, Running: o.running, Appended: o.appended, Ended: o.ended, Refused: o.refused}
}

// running puts the ask's span and state in the run's context, for the model wrapper.
func (o *Observer) running(ctx context.Context, ticket string) context.Context {
	a := o.lookup(ticket)
	if a == nil {
		return ctx
	}
	return withAsk(trace.ContextWithSpan(ctx, a.span), a)
}

// appended counts an event of a run this instance holds; a step is a tool call.
func (o *Observer) appended(ticket string, typ gen.EventType, body any, evicted int) {
	o.m.events.WithLabelValues(string(typ)).Inc()
	a := o.lookup(ticket)
	if s, ok := body.(gen.StepBody); ok {
		outcome := "ok"
		switch {
		case s.Refused:
			outcome = "refused"
		case s.Error != nil:
			outcome = "error"
		}
		tool := o.toolLabel(s.Source, s.Tool)
		o.m.toolCalls.WithLabelValues(s.Source, tool, strconv.FormatBool(s.Refused), outcome).Inc()
		d := time.Duration(s.Ms) * time.Millisecond
		o.m.toolDuration.WithLabelValues(s.Source, tool).Observe(d.Seconds())
		if a != nil {
			a.mu.Lock()
			a.toolTime += d
			a.mu.Unlock()
		}
	}
	o.dropped(a, evicted)
}

// dropped counts steps the service reports evicted.
func (o *Observer) dropped(a *askState, evicted int) {
	if evicted <= 0 {
		return
	}
	o.m.stepsDropped.Add(float64(evicted))
	if a != nil {
		a.mu.Lock()
		a.dropped += evicted
		a.mu.Unlock()
	}
}

// ended records a log's end: for an end this instance wrote, the outcome counted once, and for
// an ask admitted here its span ended and its one line written.
func (o *Observer) ended(ticket string, e server.End) {
	if e.Outcome == "" {
		o.abandon(ticket, e.Reason)
		return
	}
	for _, typ := range e.Tail {
		o.m.events.WithLabelValues(string(typ)).Inc()
	}
	kind := ""
	if e.Error != nil {
		kind = boundedKind(string(e.Error.Kind))
	}
	outcome := string(e.Outcome)
	o.m.asks.WithLabelValues(outcome, kind).Inc()
	elapsed := e.Elapsed
	if elapsed <= 0 { // an End built without it: done's whole milliseconds are all there is
		elapsed = time.Duration(e.Done.ElapsedMs) * time.Millisecond
	}
	o.m.askDuration.WithLabelValues(outcome).Observe(elapsed.Seconds())
	a, ok := o.remove(ticket)
	if !ok {
		// Admitted by another replica, ended here (a cancel, a lapsed lease): that replica may
		// be gone (killed mid-run), so this line is the one record of how the ask ended. The
		// conversation, oid and request and trace ids were the admitting replica's to know.
		if e.Evicted > 0 {
			o.m.stepsDropped.Add(float64(e.Evicted))
		}
		d := e.Done
		o.log.Info("ask finished",
			"ticket", ticket, "admitted_elsewhere", true, "outcome", outcome, "error_kind", kind,
			"steps", d.Steps, "steps_dropped", e.Evicted, "model_calls", d.ModelCalls,
			"input_tokens", d.InputTokens, "output_tokens", d.OutputTokens, "elapsed_ms", elapsed.Milliseconds())
		return
	}
	o.dropped(a, e.Evicted)
	a.mu.Lock()
	modelTime, toolTime, dropped := a.modelTime, a.toolTime, a.dropped
	for start := range a.modelWaits { // cut by this end, and not returned yet
		modelTime += time.Since(*start)
	}
	a.mu.Unlock()
	d := e.Done
	a.span.SetAttributes(
		attribute.String("ask.outcome", outcome), attribute.Int64("ask.steps", d.Steps),
		attribute.Int64("ask.model_calls", d.ModelCalls), attribute.Int64("ask.input_tokens", d.InputTokens),
		attribute.Int64("ask.output_tokens", d.OutputTokens))
	if kind != "" {
		a.span.SetAttributes(attribute.String("ask.error_kind", kind))
		if kind != string(gen.ErrorKindCancelled) {
			a.span.SetStatus(codesError, kind)
		}
	}
	a.span.End()
	o.log.Info("ask finished",
		"ticket", a.ticket, "conversation", a.conv, "oid", a.oid, "request_id", a.requestID,
		"trace_id", traceID(a.span), "outcome", outcome, "error_kind", kind,
		"steps", d.Steps, "steps_dropped", dropped, "model_calls", d.ModelCalls,
		"input_tokens", d.InputTokens, "output_tokens", d.OutputTokens,
		"elapsed_ms", elapsed.Milliseconds(), "model_ms", modelTime.Milliseconds(), "tool_ms", toolTime.Milliseconds())
}

// MaxToolLabels is how many tool names a source's tool-call metrics carry as label values;
// the calls of any other tool of that source are counted under OtherTool. A source lists at
// most 128 tools in a session (agent/source.MaxTools), but may list other names in the next: a
// name is the source's own text, and one naming tools after what it was sent (saved searches)
// made a new series per name, without bound.
const MaxToolLabels = 128

// OtherTool is the tool label of the calls of a source's tools past its MaxToolLabels names.
const OtherTool = "other"

// toolLabel is tool's label value for source: its name while the source has fewer than
// MaxToolLabels names counted (or this one among them), OtherTool once it has them.
func (o *Observer) toolLabel(source, tool string) string {
	o.toolsMu.Lock()
	defer o.toolsMu.Unlock()
	names := o.tools[source]
	if names == nil {
		names = map[string]bool{}
		o.tools[source] = names
	}
	switch {
	case names[tool]:
	case len(names) >= MaxToolLabels:
		return OtherTool
	default:
		names[tool] = true
	}
	return tool
}
