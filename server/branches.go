package server

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// openBranches is the branches below the supervisor's that a run has opened, in order, and
// which of them are still open: the end of the log closes those, innermost last opened first,
// before the supervisor's close, so that every branch opens and closes exactly once even when
// cancel, the deadline or shutdown ends the run mid-branch.
type openBranches struct {
	seen map[string]bool
	open []gen.BranchBody
}

// admits reports whether b may be appended: the first open of its id, or the close of a branch
// that is open.
func (o *openBranches) admits(b gen.BranchBody) bool {
	switch b.State {
	case gen.BranchBodyStateOpen:
		return !o.seen[b.BranchId]
	case gen.BranchBodyStateClose:
		return slices.ContainsFunc(o.open, func(x gen.BranchBody) bool { return x.BranchId == b.BranchId })
	}
	return false
}

// isOpen reports whether the branch id is open now.
func (o *openBranches) isOpen(id string) bool {
	return slices.ContainsFunc(o.open, func(x gen.BranchBody) bool { return x.BranchId == id })
}

// record notes an appended branch event.
func (o *openBranches) record(b gen.BranchBody) {
	switch b.State {
	case gen.BranchBodyStateOpen:
		if o.seen == nil {
			o.seen = map[string]bool{}
		}
		o.seen[b.BranchId] = true
		o.open = append(o.open, b)
	case gen.BranchBodyStateClose:
		o.open = slices.DeleteFunc(o.open, func(x gen.BranchBody) bool { return x.BranchId == b.BranchId })
	}
}

// closes are the close events of the branches still open, last opened first.
func (o *openBranches) closes() []gen.BranchBody {
	out := make([]gen.BranchBody, 0, len(o.open))
	for _, b := range slices.Backward(o.open) {
		b.State = gen.BranchBodyStateClose
		out = append(out, b)
	}
	return out
}

// endOfLog is the tail every log ends with: the close of each branch still open, the
// supervisor branch's close, the terminal event and done.
func endOfLog(closes []gen.BranchBody, typ gen.EventType, body any, done gen.DoneBody) []struct {
	typ  gen.EventType
	body any
} {
	tail := make([]struct {
		typ  gen.EventType
		body any
	}, 0, len(closes)+3)
	for _, c := range closes {
		tail = append(tail, struct {
			typ  gen.EventType
			body any
		}{gen.EventTypeBranch, c})
	}
	return append(tail, []struct {
		typ  gen.EventType
		body any
	}{
		{gen.EventTypeBranch, gen.BranchBody{BranchId: supervisorBranch, Role: "supervisor", State: gen.BranchBodyStateClose}},
		{typ, body},
		{gen.EventTypeDone, done},
	}...)
}

// branchesOpenIn reads a ticket's log up to seq last at least (branch events are never
// evicted) for the branches below the supervisor's that are open, for a replica that ends a run
// it does not run. A shared store's read may trail a change another replica just made (its
// notification is on its way, and then the read's channel closes): it reads on until the log
// reaches last, the seq the end will continue, so that no branch opened before it is missed.
func branchesOpenIn(ctx context.Context, sh store.Shared, ticket string, last int64) (openBranches, time.Time, error) {
	var o openBranches
	var evs []store.Event
	for after := int64(0); ; {
		b, err := sh.Read(ctx, ticket, after)
		if err != nil {
			return o, time.Time{}, err
		}
		evs = append(evs, b.Events...)
		if n := len(b.Events); n > 0 {
			after = b.Events[n-1].Seq
		}
		if after >= last || b.Finished {
			break
		}
		select {
		case <-b.Changed:
		case <-ctx.Done():
			return o, time.Time{}, ctx.Err()
		}
	}
	var at time.Time
	if n := len(evs); n > 0 {
		var env struct {
			TS time.Time `json:"ts"`
		}
		if json.Unmarshal(evs[n-1].Data, &env) == nil {
			at = env.TS
		}
	}
	for _, e := range evs {
		if e.Type != gen.EventTypeBranch {
			continue
		}
		var br gen.BranchBody
		if json.Unmarshal(e.Data, &br) != nil || br.BranchId == supervisorBranch || !o.admits(br) {
			continue
		}
		o.record(br)
	}
	return o, at, nil
}
