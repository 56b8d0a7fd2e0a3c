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
