package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/model"
)

// Options configure an Agent. Zero values mean defaults.
type Options struct {
	// Model is the language model. Required.
	Model model.Model
	// Sources are the MCP sources each run connects to. Required.
	Sources []SourceConfig
	// Logger receives the run's structural log lines (never the question or a token); nil
	// means discard.
	Logger *slog.Logger
	// HTTPClient carries the MCP requests to the sources; nil means http.DefaultTransport's
	// settings, except that a plain-http source is never reached through the environment's
	// proxy (see source.Options.HTTPClient).
	HTTPClient *http.Client
	// MaxModelCalls caps the model calls of one run; zero means DefaultMaxModelCalls.
	MaxModelCalls int
	// SystemPrompt replaces the default system prompt when set.
	SystemPrompt string
	// ToolTimeout bounds one tool call; zero means DefaultToolTimeout. A tool call in flight
	// when the run is cancelled or times out is not cut short: it completes (tools are
	// read-only, and the source's audit line then records it) within this bound.
	ToolTimeout time.Duration
	// HandshakeLinger is how long a source's handshake (initialize, tools/list) still pending
	// when its run ends may go on, so that the session it opens is closed properly rather than
	// left to the source's idle timeout; zero means DefaultHandshakeLinger, and it is never more
	// than ToolTimeout. A handshake whose run is still going is bounded by ToolTimeout alone.
	HandshakeLinger time.Duration
	// MaxLingeringHandshakes is how many handshakes with one source may linger at once (their
	// runs ended), across every run of the Agent; a run that ends while they are all taken has
	// its handshake with that source cancelled at once. Zero means DefaultMaxLingeringHandshakes.
	// It bounds what asks cancelled in a loop hold at a source that hangs: this many connections
	// (and their goroutines) per source, each for at most HandshakeLinger.
	MaxLingeringHandshakes int
	// Phase is 1 (zero: the default) for one loop in the supervisor branch, or 2 for a branch
	// per source, reconciled by the supervisor (see the package doc).
	Phase int
	// DivergenceTurns, in phase 2, caps the model calls of the catalog-withheld branch that
	// answer.divergence is computed from; zero means no such branch and divergence null.
	DivergenceTurns int
	// TracerProvider starts a span per tool call, a child of the span in the run's context
	// (the ask's); its trace context goes to the source in a W3C traceparent header, so the
	// source's audit line can name the trace. nil means no spans.
	TracerProvider trace.TracerProvider
}

// DefaultToolTimeout bounds one tool call when Options.ToolTimeout is zero.
const DefaultToolTimeout = 60 * time.Second

// Agent runs questions. It is safe for concurrent use: each Run has its own source sessions
// (authenticated as that run's caller) and its own conversation with the model.
type Agent struct {
	model    model.Model
	sources  []SourceConfig
	log      *slog.Logger
	hc       *http.Client
	maxTurns int
	system   string
	toolTime time.Duration
	tracer   trace.Tracer
	phase    int
	// divergenceTurns is the withheld branch's model-call cap; 0 means no divergence.
	divergenceTurns int
	// linger is how long a handshake may go on once its run has ended (see connect).
	linger time.Duration
	// lingering holds, per source (by index in sources), a slot for each of its handshakes
	// lingering after their runs ended; its capacity is Options.MaxLingeringHandshakes.
	lingering []chan struct{}
}

var _ ask.Runner = (*Agent)(nil)

// New returns an Agent. It fails when the model or the sources are missing.
func New(opts Options) (*Agent, error) {
	if opts.Model == nil {
		return nil, errors.New("agent: a model is required")
	}
	switch opts.Phase {
	case 0, 1, 2:
	default:
		return nil, fmt.Errorf("agent: phase %d: want 1 or 2", opts.Phase)
	}
	if opts.DivergenceTurns < 0 || (opts.DivergenceTurns > 0 && opts.Phase != 2) {
		return nil, errors.New("agent: divergence needs phase 2 and a non-negative number of turns")
	}
	if len(opts.Sources) == 0 {
		return nil, errors.New("agent: at least one source is required")
	}
	a := &Agent{
		model: opts.Model, sources: opts.Sources, log: opts.Logger, hc: opts.HTTPClient,
		maxTurns: opts.MaxModelCalls, system: opts.SystemPrompt, toolTime: opts.ToolTimeout,
		phase: max(opts.Phase, 1), divergenceTurns: opts.DivergenceTurns,
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	a.tracer = tp.Tracer("github.com/das-ask/ask/agent")
	if a.toolTime <= 0 {
		a.toolTime = DefaultToolTimeout
	}
	a.linger = opts.HandshakeLinger
	if a.linger <= 0 {
		a.linger = DefaultHandshakeLinger
	}
	a.linger = min(a.linger, a.toolTime)
	slots := opts.MaxLingeringHandshakes
	if slots <= 0 {
		slots = DefaultMaxLingeringHandshakes
	}
	a.lingering = make([]chan struct{}, len(a.sources))
	for i := range a.lingering {
		a.lingering[i] = make(chan struct{}, slots)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.maxTurns <= 0 {
		a.maxTurns = DefaultMaxModelCalls
	}
	if a.system == "" {
		a.system = defaultSystemPrompt
	}
	return a, nil
}
