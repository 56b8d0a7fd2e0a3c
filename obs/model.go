package obs

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/das-ask/ask/agent/model"
)

// Model wraps a model adapter: every call is a span (a child of the ask's when the context
// carries one) and counts towards the calls, tokens, errors and latency of provider, which
// should be the configured provider's name (ASK_LLM: anthropic, openai, stub). Neither the
// prompt nor the reply is recorded.
func (o *Observer) Model(m model.Model, provider string) model.Model {
	return observedModel{m: m, o: o, provider: provider}
}

type observedModel struct {
	m        model.Model
	o        *Observer
	provider string
}

func (w observedModel) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	ctx, span := w.o.tracer.Start(ctx, "ask.model_call", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.system", w.provider), attribute.Int("ask.messages", len(req.Messages))))
	defer span.End()
	start := time.Now()
	a := askFrom(ctx)
	if a != nil {
		a.mu.Lock()
		if a.modelWaits == nil {
			a.modelWaits = map[*time.Time]struct{}{}
		}
		a.modelWaits[&start] = struct{}{}
		a.mu.Unlock()
	}
	resp, err := w.m.Complete(ctx, req)
	d := time.Since(start)
	m := w.o.m
	m.modelCalls.WithLabelValues(w.provider).Inc()
	m.modelDuration.WithLabelValues(w.provider).Observe(d.Seconds())
	// A negative count (a provider's bug) adds nothing, as in done's usage: a counter's Add
	// panics on one, which ended a run whose reply was good in error{internal}.
	in, out := max(resp.Usage.InputTokens, 0), max(resp.Usage.OutputTokens, 0)
	m.modelTokens.WithLabelValues(w.provider, "input").Add(float64(in))
	m.modelTokens.WithLabelValues(w.provider, "output").Add(float64(out))
	span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", in),
		attribute.Int64("gen_ai.usage.output_tokens", out), attribute.Int("ask.tool_calls", len(resp.ToolCalls)))
	if err != nil {
		kind := string(model.KindOf(err))
		switch {
		case kind != "":
		case errors.Is(err, context.DeadlineExceeded), errors.Is(context.Cause(ctx), context.DeadlineExceeded):
			// The call's own deadline, or the run's: the service ends a run at its deadline
			// by cancelling its context with a cause that is a deadline (errors.Is).
			kind = "timeout"
		case errors.Is(err, context.Canceled):
			kind = "cancelled"
		default:
			kind = "other"
		}
		m.modelErrors.WithLabelValues(w.provider, kind).Inc()
		span.SetAttributes(attribute.String("ask.error_kind", kind))
		span.SetStatus(codes.Error, kind)
	}
	if a != nil {
		a.mu.Lock()
		delete(a.modelWaits, &start)
		a.modelTime += d
		a.mu.Unlock()
	}
	return resp, err
}
