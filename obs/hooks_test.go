package obs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
)

func admit(o *obs.Observer, ticket string) server.Hooks {
	h := o.Hooks()
	h.Admitted(context.Background(), server.Admission{Ticket: ticket, Conversation: "c1", OID: "alice", CreatedAt: time.Now()})
	return h
}

// TestHooksCountWhatTheServiceReports: steps and their evictions as the service reports them,
// the outcome from the typed done, and one `ask finished` line.
func TestHooksCountWhatTheServiceReports(t *testing.T) {
	var logs bytes.Buffer
	o := obs.New(obs.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	h := admit(o, "t1")
	if got := value(gather(t, o), "ask_asks_running"); got != 1 {
		t.Errorf("running %v, want 1", got)
	}
	for i := range 20 {
		h.Appended("t1", gen.EventTypeStep, gen.StepBody{Source: "demo", Tool: "query", Ms: 5}, min(i%2, 1))
	}
	h.Ended("t1", server.End{Outcome: gen.EventTypeAnswer, Evicted: 3,
		Done: gen.DoneBody{Outcome: gen.DoneBodyOutcomeAnswer, Steps: 20, ElapsedMs: 1500}})
	fams := gather(t, o)
	if got := value(fams, "ask_step_events_dropped_total"); got != 13 {
		t.Errorf("dropped %v, want the 10 + 3 reported", got)
	}
	if got := value(fams, "ask_events_emitted_total", "type", "step"); got != 20 {
		t.Errorf("steps emitted %v, want 20", got)
	}
	if got := value(fams, "ask_asks_total", "outcome", "answer", "kind", ""); got != 1 {
		t.Errorf("answers %v, want 1", got)
	}
	if got := value(fams, "ask_asks_running"); got != 0 {
		t.Errorf("running %v, want 0", got)
	}
	if n := strings.Count(logs.String(), `"msg":"ask finished"`); n != 1 || !strings.Contains(logs.String(), `"steps_dropped":13`) {
		t.Errorf("want one ask finished line with steps_dropped 13, got:\n%s", logs.String())
	}
}

// TestHooksEndedElsewhereOrNotRecorded: an ask whose end this instance will not see (another
// replica ended it, or the store failed to record the end) is forgotten with a line, and no
// outcome is counted; an end this instance wrote for another replica's ask is counted, with a
// line of its own: that replica may be dead (its lease lapsed), and the line is then the one
// record of how the ask ended. Found by an operator's audit: a replica SIGKILLed mid-run left
// its ask ended error{interrupted} by another, counted there, and in no log at all.
func TestHooksEndedElsewhereOrNotRecorded(t *testing.T) {
	var logs bytes.Buffer
	o := obs.New(obs.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for _, reason := range []string{"ended_elsewhere", "store_error"} {
		h := admit(o, reason)
		h.Ended(reason, server.End{Reason: reason})
	}
	fams := gather(t, o)
	if got := value(fams, "ask_asks_running"); got != 0 {
		t.Errorf("running %v, want 0", got)
	}
	if got := sum(fams, "ask_asks_total"); got != 0 {
		t.Errorf("asks counted %v, want none: no outcome was recorded here", got)
	}
	o.Hooks().Ended("t-remote", server.End{Outcome: gen.EventTypeError, Remote: true,
		Error: &gen.ErrorBody{Kind: gen.ErrorKindInterrupted}, Done: gen.DoneBody{Outcome: gen.DoneBodyOutcomeError}})
	if got := value(gather(t, o), "ask_asks_total", "outcome", "error", "kind", "interrupted"); got != 1 {
		t.Errorf("interrupted asks %v, want 1", got)
	}
	if n := strings.Count(logs.String(), `"msg":"ask finished"`); n != 3 {
		t.Errorf("want a line for each ask admitted here (2) and for the end written here (1), got:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"ask finished","ticket":"t-remote","admitted_elsewhere":true,"outcome":"error","error_kind":"interrupted"`) {
		t.Errorf("no line says how t-remote ended:\n%s", logs.String())
	}
}

// TestAskDurationAtFullPrecision: ask_ask_duration_seconds records the end's Elapsed as it is,
// not done's whole milliseconds (an ask of 1.234567 ms recorded 0.001; one under 1 ms, 0); an
// End without it falls back on done's milliseconds.
func TestAskDurationAtFullPrecision(t *testing.T) {
	o := obs.New(obs.Options{})
	admit(o, "t1").Ended("t1", server.End{Outcome: gen.EventTypeAnswer, Elapsed: 1234567 * time.Nanosecond,
		Done: gen.DoneBody{Outcome: gen.DoneBodyOutcomeAnswer, ElapsedMs: 1}})
	admit(o, "t2").Ended("t2", server.End{Outcome: gen.EventTypeAnswer, Elapsed: 300 * time.Microsecond,
		Done: gen.DoneBody{Outcome: gen.DoneBodyOutcomeAnswer, ElapsedMs: 0}})
	o.Hooks().Ended("t-remote", server.End{Outcome: gen.EventTypeAnswer, Remote: true,
		Done: gen.DoneBody{Outcome: gen.DoneBodyOutcomeAnswer, ElapsedMs: 2}})
	h := gather(t, o)["ask_ask_duration_seconds"].GetMetric()[0].GetHistogram()
	if got, want := h.GetSampleSum(), 0.001234567+0.0003+0.002; math.Abs(got-want) > 1e-12 || h.GetSampleCount() != 3 {
		t.Errorf("duration sum %v over %d asks, want %v over 3", got, h.GetSampleCount(), want)
	}
}

// waitingModel answers nothing until its call's context ends.
type waitingModel struct{}

func (waitingModel) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	<-ctx.Done()
	return model.Response{}, ctx.Err()
}

// TestAskFinishedCountsTheModelCallInFlight: an ask the service ends while a model call is
// still waiting (its deadline, the shutdown grace's end) has that wait in its line's
// `model_ms`: the line is written at the end, before the cut call returns. It said
// `"model_calls":1,…,"elapsed_ms":2000,"model_ms":0` for an ask timed out by a model that
// never answered, pointing the operator away from the model.
func TestAskFinishedCountsTheModelCallInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		o := obs.New(obs.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		h := admit(o, "t1")
		ctx, cancel := context.WithCancel(h.Running(t.Context(), "t1"))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = o.Model(waitingModel{}, "stub").Complete(ctx, model.Request{})
		}()
		time.Sleep(2 * time.Second)
		h.Ended("t1", server.End{Outcome: gen.EventTypeError, Elapsed: 2 * time.Second,
			Error: &gen.ErrorBody{Kind: gen.ErrorKindTimeout},
			Done:  gen.DoneBody{Outcome: gen.DoneBodyOutcomeError, ModelCalls: 1, ElapsedMs: 2000}})
		cancel()
		<-done
		if !strings.Contains(logs.String(), `"model_ms":2000,`) {
			t.Errorf("want the 2 s the model call had waited in model_ms, got:\n%s", logs.String())
		}
	})
}

// TestToolLabelsBounded: a source's tool-call metrics carry at most obs.MaxToolLabels tool
// names; the calls of its other tools count under obs.OtherTool, and each source has its own
// names. A source may list new names in every session (named after what it was sent), and
// each made a series of its own.
func TestToolLabelsBounded(t *testing.T) {
	o := obs.New(obs.Options{})
	h := admit(o, "t1")
	for i := range obs.MaxToolLabels + 50 {
		h.Appended("t1", gen.EventTypeStep, gen.StepBody{Source: "saved", Tool: fmt.Sprintf("search %d", i), Ms: 1}, 0)
	}
	h.Appended("t1", gen.EventTypeStep, gen.StepBody{Source: "saved", Tool: "search 0", Ms: 1}, 0)
	h.Appended("t1", gen.EventTypeStep, gen.StepBody{Source: "demo", Tool: "run_query", Ms: 1}, 0)
	fams := gather(t, o)
	names := map[string]bool{}
	if f := fams["ask_tool_calls_total"]; f != nil {
		for _, m := range f.GetMetric() {
			var src, tool string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "source":
					src = l.GetValue()
				case "tool":
					tool = l.GetValue()
				}
			}
			if src == "saved" {
				names[tool] = true
			}
		}
	}
	if len(names) != obs.MaxToolLabels+1 || !names[obs.OtherTool] {
		t.Errorf("%d tool labels for the source, want %d names and %q", len(names), obs.MaxToolLabels, obs.OtherTool)
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"source", "saved", "tool", "search 0", "refused", "false", "outcome", "ok"}, 2},
		{[]string{"source", "saved", "tool", obs.OtherTool, "refused", "false", "outcome", "ok"}, 50},
		{[]string{"source", "demo", "tool", "run_query", "refused", "false", "outcome", "ok"}, 1},
	} {
		if got := value(fams, "ask_tool_calls_total", c.labels...); got != c.want {
			t.Errorf("ask_tool_calls_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
}
