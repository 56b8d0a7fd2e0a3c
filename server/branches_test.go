package server_test

import (
	"context"
	"encoding/json"
	"slices"
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
