package agent

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/gen"
)

// SupervisorBranch is the branch the service opens around every run; phase 2's branches run
// inside it.
const SupervisorBranch = "b1"

// Branch roles below the supervisor.
const (
	RoleSource   = "source"
	RoleWithheld = "withheld"
)

// branchEmitter stamps every step and milestone with the branch it was made in.
type branchEmitter struct {
	ask.Emitter
	id string
}

func (e branchEmitter) Step(s gen.StepBody) {
	s.BranchId = &e.id
	e.Emitter.Step(s)
}

func (e branchEmitter) Milestone(m gen.MilestoneBody) {
	m.BranchId = &e.id
	e.Emitter.Milestone(m)
}

// branchRun is one branch's part of a phase-2 run.
type branchRun struct {
	id     string
	source string // "" for the withheld branch
	led    *ledger
	lp     loopEnd
}

// fanOut is a phase-2 run (see the package doc): one branch per source, concurrently, each a
// sub-agent with that source's tools only; the catalog-withheld branch beside them when
// divergence is on; then the supervisor reconciles what the source branches found and produces
// the one outcome. A refusal in any branch stops the others at once.
func (a *Agent) fanOut(ctx context.Context, req ask.Request, sessions []*source.Session, emit ask.Emitter) ask.Outcome {
	bctx, stop := context.WithCancel(ctx)
	// The withheld branch may outlive the source branches (the supervisor reconciles without
	// waiting for it): whatever ends the run first stops it, then waits for it.
	var withheld sync.WaitGroup
	defer withheld.Wait()
	defer stop()
	start := conversation(req.History, req.Question)
	sup := SupervisorBranch

	branches := make([]*branchRun, 0, len(sessions)+1)
	tools := make([]toolset, 0, len(sessions)+1)
	systems := make([]string, 0, len(sessions)+1)
	for i, s := range sessions {
		branches = append(branches, &branchRun{id: fmt.Sprintf("b%d", i+2), source: s.Name()})
		tools = append(tools, newToolset([]*source.Session{s}))
		systems = append(systems, fmt.Sprintf(branchPrompt, a.system, s.Name()))
	}
	if a.divergenceTurns > 0 {
		if ts, ok := withheldTools(sessions); ok {
			branches = append(branches, &branchRun{id: fmt.Sprintf("b%d", len(sessions)+2)})
			tools = append(tools, ts)
			systems = append(systems, withheldPrompt)
		}
	}

	// The withheld branch must not turn an answer into a timeout: its failure never fails the
	// ask, and nor may its slowness. It stops withheldReserve before the run's deadline, so the
	// answer can still be written without divergence.
	wctx := bctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(bctx, dl.Add(-withheldReserve(time.Until(dl))))
		defer cancel()
	}
	var wg sync.WaitGroup
	for i, b := range branches {
		bc, group := bctx, &wg
		if b.source == "" {
			bc, group = wctx, &withheld
		}
		// Opened here, one after another, so the stream opens the branches in the order of
		// their ids (DAS_SOURCES order, then the withheld branch); opened by each goroutine, the
		// order was the scheduler's (b5, b3, b2, b4 on three sources).
		body := gen.BranchBody{BranchId: b.id, Role: RoleSource, Parent: &sup, State: gen.BranchBodyStateOpen}
		turns := a.maxTurns
		if b.source == "" {
			body.Role, turns = RoleWithheld, a.divergenceTurns
		} else {
			body.Source = &b.source
		}
		emit.Branch(body)
		group.Go(func() {
			defer func() {
				body.State = gen.BranchBodyStateClose
				emit.Branch(body)
			}()
			b.led = newLedger(req)
			// A branch runs on a goroutine of its own, outside the service's recovery of a
			// runner's panic: a panic here (a provider SDK's bug on an odd reply, say) would end
			// the process and every run in it. It ends this branch in error{internal} instead,
			// which the outcome rules below treat as any branch's error.
			defer func() {
				if v := recover(); v != nil {
					// The panic value is not logged: it could hold anything the branch held, the
					// question included.
					a.log.Error("branch panicked", "ticket", req.Ticket, "branch", b.id, "panic_type", fmt.Sprintf("%T", v), "stack", string(debug.Stack()))
					b.lp = loopEnd{end: &ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindInternal, Message: "internal error"}}}
				}
			}()
			b.lp = a.loop(bc, loopSpec{system: systems[i], msgs: slices.Clone(start), tools: tools[i], led: b.led, emit: branchEmitter{emit, b.id}, turns: turns})
			if b.lp.end != nil && b.lp.end.Refusal != nil {
				stop()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return failure(ctx, gen.ErrorKindCancelled, ctx.Err())
	}

	// Outcome rules, mechanical across branches: a refusal in any branch (the withheld one
	// included) is the run's refusal; otherwise a source branch's error is the run's error;
	// otherwise the supervisor reconciles. The withheld branch's end is waited for only where
	// it decides: before a source branch's error (its refusal would win), and after the
	// reconciliation.
	sourceBranches := branches[:len(sessions)]
	var w *branchRun
	if len(branches) > len(sessions) {
		w = branches[len(sessions)]
	}
	refused := func() *ask.Outcome { // the withheld branch's refusal, once it has ended
		withheld.Wait()
		if w != nil && w.lp.end != nil && w.lp.end.Refusal != nil {
			return w.lp.end
		}
		return nil
	}
	for _, b := range sourceBranches {
		if b.lp.end != nil && b.lp.end.Refusal != nil {
			return *b.lp.end
		}
	}
	for _, b := range sourceBranches {
		if b.lp.end != nil {
			if r := refused(); r != nil {
				return *r
			}
			return *b.lp.end
		}
	}

	if bctx.Err() != nil { // stopped by the withheld branch's refusal: nothing to reconcile
		if r := refused(); r != nil {
			return *r
		}
	}

	led := newLedger(req)
	msgs := slices.Clone(start)
	names := make([]string, 0, len(sourceBranches))
	for _, b := range sourceBranches {
		names = append(names, b.source)
	}
	supTools := newToolset(sessions)
	branchTools := map[*branchRun]toolset{}
	for i, b := range sourceBranches {
		branchTools[b] = tools[i]
	}
	for _, b := range reconcileOrder(sourceBranches) {
		led.merge(b.led)
		msgs = append(msgs, delegated(b.id, b.lp.msgs[len(start):], supTools.renamer(branchTools[b]))...)
	}
	supEmit := branchEmitter{emit, sup}
	supEmit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseReconciling, Subject: led.reconcileSubject(), Source: strings.Join(names, ",")})
	// Under bctx: a refusal in the withheld branch meanwhile stops the reconciliation too.
	lp := a.loop(bctx, loopSpec{system: a.system + reconcilePrompt, msgs: msgs, tools: supTools, led: led, emit: supEmit, turns: a.maxTurns})
	if lp.end != nil && lp.end.Refusal != nil {
		// The reconciliation's own refusal is the run's: like a branch's, it stops the
		// withheld branch at once rather than waiting it out (it used to wait, as long as
		// until the withheld branch's own deadline, before the refusal was told).
		stop()
		return *lp.end
	}
	if r := refused(); r != nil {
		return *r
	}
	if lp.end != nil {
		return *lp.end
	}
	out := led.outcome(lp.text)
	if out.Answer != nil && w != nil && w.lp.end == nil {
		out.Answer.Divergence = divergence(out.Answer, w.led.outcome(w.lp.text).Answer, led.definitions)
	}
	return out
}

// withheldReserve is how long before the run's deadline the withheld branch is stopped, of a
// run with left to go when it fans out: a tenth, at most a second, enough to write the answer
// without divergence.
func withheldReserve(left time.Duration) time.Duration {
	return min(time.Second, left/10)
}

// reconcileOrder is the order the supervisor is handed the source branches' work in, and so the
// order of the answer's statements, whose last is the result: first the branches that ran no
// statement (the catalog's definitions, say), then those whose last statement ran without a
// definition in hand, then those whose last statement was written with one; DAS_SOURCES order
// within each. The branches run concurrently, so the configuration's order says nothing about
// which result should stand; a statement written with the catalog's meaning in hand should,
// and a definition seen after a statement written without it is what makes the supervisor run
// the statement again.
func reconcileOrder(branches []*branchRun) []*branchRun {
	rank := func(b *branchRun) int {
		switch n := len(b.led.statements); {
		case n == 0:
			return 0
		case !b.led.statements[n-1].informed:
			return 1
		}
		return 2
	}
	out := slices.Clone(branches)
	slices.SortStableFunc(out, func(a, b *branchRun) int { return rank(a) - rank(b) })
	return out
}

// delegated is a branch's tool-call turns as the supervisor's own: the supervisor delegated them,
// so its model sees every call a branch made and what it returned, in the branch's order. The
// branch's closing prose is left out (the facts are in the results), call ids are prefixed
// with the branch so that two branches' ids never collide, and each call names the tool as the
// supervisor is offered it (rename: a branch's "run_query" is the supervisor's
// "warehouse__run_query" when another source offers a run_query too).
func delegated(branch string, msgs []model.Message, rename func(string) string) []model.Message {
	var out []model.Message
	for _, m := range msgs {
		switch {
		case m.Role == model.RoleAssistant && len(m.ToolCalls) > 0:
			calls := make([]model.ToolCall, len(m.ToolCalls))
			for i, c := range m.ToolCalls {
				c.ID, c.Name = branch+"_"+c.ID, rename(c.Name)
				calls[i] = c
			}
			out = append(out, model.Message{Role: model.RoleAssistant, Text: m.Text, ToolCalls: calls})
		case len(m.ToolResults) > 0:
			res := make([]model.ToolResult, len(m.ToolResults))
			for i, r := range m.ToolResults {
				r.CallID = branch + "_" + r.CallID
				res[i] = r
			}
			out = append(out, model.Message{Role: m.Role, ToolResults: res})
		}
	}
	return out
}

// withheldTools is every tool of the sessions except the catalog's: the same question answered
// without definitions or caveats. ok is false when no source offers a catalog tool (nothing
// would be withheld) or every tool is a catalog tool (nothing would be left to answer with).
func withheldTools(sessions []*source.Session) (toolset, bool) {
	ts := newToolset(sessions)
	out := toolset{byName: map[string]boundTool{}}
	withheld := false
	for _, spec := range ts.specs {
		t := ts.byName[spec.Name]
		if t.Role == source.RoleCatalogSearch || t.Role == source.RoleCatalogDefine {
			withheld = true
			continue
		}
		out.byName[spec.Name] = t
		out.specs = append(out.specs, spec)
	}
	return out, withheld && len(out.specs) > 0
}

// merge adds what another ledger (a branch's) found to l.
func (l *ledger) merge(o *ledger) {
	for _, s := range o.consulted {
		if !slices.Contains(l.consulted, s) {
			l.consulted = append(l.consulted, s)
		}
	}
	for _, t := range o.termsTried {
		if !slices.Contains(l.termsTried, t) {
			l.termsTried = append(l.termsTried, t)
		}
	}
	for _, d := range o.definitions {
		if !slices.ContainsFunc(l.definitions, func(h definition) bool { return h.Term == d.Term && h.Source == d.Source }) {
			l.definitions = append(l.definitions, d)
		}
	}
	l.statements = append(l.statements, o.statements...)
}

// reconcileSubject names what the reconciliation is about, in the catalog's vocabulary: the
// terms the branches defined, else the tables they queried, else "sources".
func (l *ledger) reconcileSubject() string {
	var parts []string
	for _, d := range l.definitions {
		parts = append(parts, d.Term)
	}
	if len(parts) == 0 {
		for _, s := range l.statements {
			for _, t := range tablesOf(s.SQL) {
				if !slices.Contains(parts, t) {
					parts = append(parts, t)
				}
			}
		}
	}
	if s := l.clean(strings.Join(parts, ", ")); s != "" {
		return s
	}
	return "sources"
}
