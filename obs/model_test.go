package obs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/obs"
)

type fakeModel struct {
	resp model.Response
	err  error
}

func (f fakeModel) Complete(context.Context, model.Request) (model.Response, error) {
	return f.resp, f.err
}

func TestModelCountsCallsTokensAndErrors(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tracing, err := obs.NewTracing(t.Context(), obs.TracingOptions{Exporter: spans})
	if err != nil {
		t.Fatal(err)
	}
	defer tracing.Shutdown(context.Background())
	o := obs.New(obs.Options{TracerProvider: tracing.Provider})
	ok := o.Model(fakeModel{resp: model.Response{Text: "secret prose", Usage: model.Usage{InputTokens: 100, OutputTokens: 7}}}, "anthropic")
	limited := o.Model(fakeModel{err: &model.Error{Kind: model.KindRateLimited, Status: 429, Message: "slow down"}}, "anthropic")
	gone := o.Model(fakeModel{err: context.Canceled}, "openai")
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "the question"}}}
	for range 2 {
		if _, err := ok.Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := limited.Complete(t.Context(), req); model.KindOf(err) != model.KindRateLimited {
		t.Fatalf("the wrapper changed the error: %v", err)
	}
	if _, err := gone.Complete(t.Context(), req); !errors.Is(err, context.Canceled) {
		t.Fatalf("the wrapper changed the error: %v", err)
	}
	fams := gather(t, o)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ask_model_calls_total", []string{"provider", "anthropic"}, 3},
		{"ask_model_calls_total", []string{"provider", "openai"}, 1},
		{"ask_model_tokens_total", []string{"provider", "anthropic", "direction", "input"}, 200},
		{"ask_model_tokens_total", []string{"provider", "anthropic", "direction", "output"}, 14},
		{"ask_model_errors_total", []string{"provider", "anthropic", "kind", "rate_limited"}, 1},
		{"ask_model_errors_total", []string{"provider", "openai", "kind", "cancelled"}, 1},
		{"ask_model_call_duration_seconds", []string{"provider", "anthropic"}, 3},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	got := spans.GetSpans()
	if len(got) != 4 {
		t.Fatalf("%d spans, want one per call", len(got))
	}
	if got[2].Status.Code != codes.Error || got[0].Status.Code == codes.Error {
		t.Errorf("span statuses %v, %v: want the failed call's to be an error", got[0].Status, got[2].Status)
	}
	for _, sp := range got {
		for _, kv := range sp.Attributes {
			if v := kv.Value.String(); v == "the question" || v == "secret prose" {
				t.Errorf("span attribute %s holds the conversation", kv.Key)
			}
		}
	}
}

// A call cut by the run's deadline counts as a timeout, though the run's context ends by a
// cancel: the service cancels it with a cause that is a deadline.
func TestModelCutByTheRunsDeadlineIsATimeout(t *testing.T) {
	o := obs.New(obs.Options{})
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(fmt.Errorf("ask deadline passed: %w", context.DeadlineExceeded))
	cut := o.Model(fakeModel{err: context.Canceled}, "anthropic")
	if _, err := cut.Complete(ctx, model.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the wrapper changed the error: %v", err)
	}
	ctx, cancel = context.WithCancelCause(t.Context())
	cancel(errors.New("ask cancelled by its caller"))
	if _, err := cut.Complete(ctx, model.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the wrapper changed the error: %v", err)
	}
	fams := gather(t, o)
	if got := value(fams, "ask_model_errors_total", "provider", "anthropic", "kind", "timeout"); got != 1 {
		t.Errorf("timeouts = %v, want 1", got)
	}
	if got := value(fams, "ask_model_errors_total", "provider", "anthropic", "kind", "cancelled"); got != 1 {
		t.Errorf("cancels = %v, want 1", got)
	}
}

// A provider that reports a negative token count (an OpenAI-compatible server's bug) costs the
// metrics nothing and the run nothing: Prometheus counters panic on a negative Add, and that
// panic ended a run whose reply was good in error{internal}.
func TestModelNegativeUsageCountsNothing(t *testing.T) {
	o := obs.New(obs.Options{})
	m := o.Model(fakeModel{resp: model.Response{Text: "ok", Usage: model.Usage{InputTokens: -5, OutputTokens: -7}}}, "openai")
	resp, err := m.Complete(t.Context(), model.Request{})
	if err != nil || resp.Text != "ok" {
		t.Fatalf("Complete = %q, %v; want the reply as the model gave it", resp.Text, err)
	}
	fams := gather(t, o)
	for _, dir := range []string{"input", "output"} {
		if got := value(fams, "ask_model_tokens_total", "provider", "openai", "direction", dir); got != 0 {
			t.Errorf("ask_model_tokens_total{%s} = %v, want 0", dir, got)
		}
	}
}
