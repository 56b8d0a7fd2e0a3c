package obs

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// Runner wraps the agent: each run's context carries its ask's span, so the model and tool
// calls it makes are children of the ask in one trace, and each step it reports counts a tool
// call. An ask that did not come through the Store wrapper gets a span of its own, from the
// start of the run to its return.
func (o *Observer) Runner(r ask.Runner) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		a := o.lookup(req.Ticket)
		if a == nil {
			var span trace.Span
			ctx, span = o.tracer.Start(ctx, "ask", trace.WithAttributes(attribute.String("ask.ticket", req.Ticket)))
			defer span.End()
			a = &askState{ticket: req.Ticket, conv: req.ConversationID, span: span, admitted: time.Now()}
		} else {
			ctx = trace.ContextWithSpan(ctx, a.span)
		}
		return r.Run(withAsk(ctx, a), req, observedEmitter{Emitter: emit, o: o, a: a})
	})
}

// observedEmitter counts what a run reports on its way to the service's emitter.
type observedEmitter struct {
	ask.Emitter
	o *Observer
	a *askState
}

func (e observedEmitter) Step(s gen.StepBody) {
	outcome := "ok"
	switch {
	case s.Refused:
		outcome = "refused"
	case s.Error != nil:
		outcome = "error"
	}
	e.o.m.toolCalls.WithLabelValues(s.Source, s.Tool, strconv.FormatBool(s.Refused), outcome).Inc()
	d := time.Duration(s.Ms) * time.Millisecond
	e.o.m.toolDuration.WithLabelValues(s.Source, s.Tool).Observe(d.Seconds())
	e.a.mu.Lock()
	e.a.toolTime += d
	e.a.mu.Unlock()
	e.Emitter.Step(s)
}
