package bench

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// The synthetic runner's instructions, spelled in the question (the bench's own questions
// carry nothing else):
//
//	"bench"             answer at once
//	"bench emit=N"      emit N step events as fast as it can, then answer
//	"bench silent"      emit nothing until the run's context ends (an idle wait)
//	"... gate"          first wait until the bench releases the ticket (debug /release)
const (
	questionNow    = "bench"
	questionSilent = "bench silent"
)

func questionEmit(n int, gate bool) string {
	q := "bench emit=" + strconv.Itoa(n)
	if gate {
		q += " gate"
	}
	return q
}

// sampleStep is the step every synthetic event carries: a realistic tool call of the demo.
func sampleStep(i int) gen.StepBody {
	return gen.StepBody{
		CallId: "call_" + strconv.Itoa(100000+i),
		Tool:   "run_query",
		Source: "demo",
		Args:   map[string]any{"sql": "SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'"},
		Ms:     12,
	}
}

// synthetic is the ask.Runner of the stream workloads. It is safe for concurrent use.
type synthetic struct{ gates *gates }

var _ ask.Runner = synthetic{}

func (s synthetic) Run(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
	n, silent, gate := 0, false, false
	for _, f := range strings.Fields(req.Question) {
		switch {
		case f == "silent":
			silent = true
		case f == "gate":
			gate = true
		case strings.HasPrefix(f, "emit="):
			n, _ = strconv.Atoi(strings.TrimPrefix(f, "emit="))
		}
	}
	if gate {
		defer s.gates.forget(req.Ticket)
		select {
		case <-s.gates.wait(req.Ticket):
		case <-ctx.Done():
			return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindCancelled, Message: "ended before release"}}
		}
	}
	if silent {
		<-ctx.Done()
		return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindCancelled, Message: "silent run ended"}}
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		emit.Step(sampleStep(i))
	}
	return ask.Outcome{Answer: &gen.AnswerBody{
		Text:       "done",
		Path:       gen.AnswerPath{Speed: gen.AnswerPathSpeedFast, Detail: "catalog"},
		Caveats:    []gen.Caveat{},
		Provenance: []gen.Provenance{},
		Sql:        []string{},
	}}
}

// gates let the bench start a run's (or a bare stream's) emission only once every reader is
// attached. Release before wait is fine: the gate is then already open.
type gates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func newGates() *gates { return &gates{m: map[string]chan struct{}{}} }

func (g *gates) ch(key string) chan struct{} {
	c, ok := g.m[key]
	if !ok {
		c = make(chan struct{})
		g.m[key] = c
	}
	return c
}

func (g *gates) wait(key string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch(key)
}

func (g *gates) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.ch(key)
	select {
	case <-c:
	default:
		close(c)
	}
}

func (g *gates) forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, key)
}
