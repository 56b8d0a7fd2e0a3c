package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// TestBranchesOpenAndCloseOnce: a runner's branches below the supervisor's each open once and
// close once — a second open of an id and a close of a branch not open are ignored — and a
// branch still open when the run is cancelled is closed by the service before the supervisor's
// close and error{cancelled}.
func TestBranchesOpenAndCloseOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := "b1"
		br := func(id string, state gen.BranchBodyState) gen.BranchBody {
			src := "src-" + id
			return gen.BranchBody{BranchId: id, Role: "source", Source: &src, Parent: &parent, State: state}
		}
		h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			emit.Branch(br("b2", gen.BranchBodyStateOpen))
			emit.Branch(br("b3", gen.BranchBodyStateOpen))
			emit.Branch(br("b2", gen.BranchBodyStateOpen))  // again: ignored
			emit.Branch(br("b9", gen.BranchBodyStateClose)) // never opened: ignored
			id := "b2"
			emit.Step(gen.StepBody{CallId: "c1", Tool: "t", Source: "src-b2", Args: map[string]any{}, BranchId: &id})
			emit.Branch(br("b2", gen.BranchBodyStateClose))
			emit.Branch(br("b2", gen.BranchBodyStateClose)) // again: ignored
			<-ctx.Done()                                    // b3 is still open
			return ask.Outcome{}
		})})
		cid := h.conv(alice)
		ticket := h.ask(alice, cid, "which branches stay open?")
		time.Sleep(time.Second)
		synctest.Wait()
		h.cancel(alice, ticket)
		frames := h.events(alice, ticket)
		var got []string
		for _, f := range frames {
			e := decode(t, f)
			if e.Type != "branch" {
				got = append(got, string(e.Type))
				continue
			}
			var b gen.BranchBody
			if err := json.Unmarshal(f.Data, &b); err != nil {
				t.Fatal(err)
			}
			got = append(got, b.BranchId+":"+string(b.State))
		}
		want := []string{"accepted", "b1:open", "b2:open", "b3:open", "step", "b2:close", "b3:close", "b1:close", "error", "done"}
		if !slices.Equal(got, want) {
			t.Errorf("log %v\nwant %v", got, want)
		}
	})
}

// TestRunnerCannotOpenASecondSupervisor: the contract's one supervisor branch is the service's
// (b1): a runner's branch with role supervisor, under any id, is ignored as one with b1's id
// is, so the log holds exactly one open and one close of that role.
func TestRunnerCannotOpenASecondSupervisor(t *testing.T) {
	h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		parent := "b1"
		for _, b := range []gen.BranchBody{
			{BranchId: "b7", Role: "supervisor", Parent: &parent, State: gen.BranchBodyStateOpen},
			{BranchId: "b1", Role: "supervisor", State: gen.BranchBodyStateOpen},
			{BranchId: "b2", Role: "source", Parent: &parent, State: gen.BranchBodyStateOpen},
			{BranchId: "b2", Role: "source", Parent: &parent, State: gen.BranchBodyStateClose},
			{BranchId: "b7", Role: "supervisor", Parent: &parent, State: gen.BranchBodyStateClose},
		} {
			emit.Branch(b)
		}
		return ask.Outcome{Answer: answer("one supervisor")}
	})})
	frames := h.events(alice, h.ask(alice, h.conv(alice), "how many supervisors?"))
	var got []string
	for _, f := range frames {
		if f.Event != "branch" {
			continue
		}
		var b gen.BranchBody
		if err := json.Unmarshal(f.Data, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b.BranchId+":"+b.Role+":"+string(b.State))
	}
	want := []string{"b1:supervisor:open", "b2:source:open", "b2:source:close", "b1:supervisor:close"}
	if !slices.Equal(got, want) {
		t.Errorf("branches %v\nwant %v", got, want)
	}
}

// A runner's slips reach no client: a step's negative wall time is 0, a model call's negative
// token counts add nothing to done's usage, a branch opened inside another than the supervisor's
// says b1 (the contract's parent of every branch below it), and a step or milestone naming a
// branch that is not open keeps its place in the log without the branch (it is still a call the
// source's audit must find). The supervisor's branch, open throughout, may be named.
func TestRunnerSlipsAreMended(t *testing.T) {
	h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		b1, b2, b9 := "b1", "b2", "b9"
		emit.ModelCall(ask.Usage{InputTokens: 100, OutputTokens: 10})
		emit.ModelCall(ask.Usage{InputTokens: -50, OutputTokens: -1 << 40})
		emit.Branch(gen.BranchBody{BranchId: "b2", Role: "source", Parent: &b9, State: gen.BranchBodyStateOpen})
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "s", Source: "demo", BranchId: &b2})
		emit.Step(gen.StepBody{CallId: "c1", Tool: "run_query", Source: "demo", Args: map[string]any{}, Ms: -7, BranchId: &b2})
		emit.Step(gen.StepBody{CallId: "c2", Tool: "run_query", Source: "demo", Args: map[string]any{}, Ms: 3, BranchId: &b9})
		emit.Branch(gen.BranchBody{BranchId: "b2", Role: "source", State: gen.BranchBodyStateClose})
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseReconciling, Subject: "s", Source: "demo", BranchId: &b1})
		emit.Step(gen.StepBody{CallId: "c3", Tool: "run_query", Source: "demo", Args: map[string]any{}, Ms: 4, BranchId: &b2})
		return ask.Outcome{Answer: answer("mended")}
	})})
	frames := h.events(alice, h.ask(alice, h.conv(alice), "what slips?"))
	var got []string
	for _, f := range frames {
		var b struct {
			BranchID *string `json:"branch_id"`
			Parent   *string `json:"parent"`
			CallID   string  `json:"call_id"`
			State    string  `json:"state"`
			Ms       *int64  `json:"ms"`
			In       *int64  `json:"input_tokens"`
			Out      *int64  `json:"output_tokens"`
		}
		if err := json.Unmarshal(f.Data, &b); err != nil {
			t.Fatal(err)
		}
		s := f.Event
		if b.BranchID != nil {
			s += " in " + *b.BranchID
		}
		switch f.Event {
		case "branch":
			s = fmt.Sprintf("branch %s %s", *b.BranchID, b.State)
			if b.Parent != nil {
				s += " parent " + *b.Parent
			}
		case "step":
			s += fmt.Sprintf(" %s ms %d", b.CallID, *b.Ms)
		case "done":
			s += fmt.Sprintf(" tokens %d/%d", *b.In, *b.Out)
		}
		got = append(got, s)
	}
	want := []string{
		"accepted",
		"branch b1 open",
		"branch b2 open parent b1",
		"milestone in b2",
		"step in b2 c1 ms 0",
		"step c2 ms 3",
		"branch b2 close",
		"milestone in b1",
		"step c3 ms 4",
		"branch b1 close",
		"answer",
		"done tokens 100/10",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
