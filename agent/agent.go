package agent

import (
	"errors"
	"log/slog"
	"net/http"

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
	// HTTPClient carries the MCP requests to the sources; nil means http.DefaultTransport.
	HTTPClient *http.Client
	// MaxTurns caps the model calls of one run; zero means DefaultMaxTurns.
	MaxTurns int
	// SystemPrompt replaces the default system prompt when set.
	SystemPrompt string
}

// Agent runs questions. It is safe for concurrent use: each Run has its own source sessions
// (authenticated as that run's caller) and its own conversation with the model.
type Agent struct {
	model    model.Model
	sources  []SourceConfig
	log      *slog.Logger
	hc       *http.Client
	maxTurns int
	system   string
}

var _ ask.Runner = (*Agent)(nil)

// New returns an Agent. It fails when the model or the sources are missing.
func New(opts Options) (*Agent, error) {
	if opts.Model == nil {
		return nil, errors.New("agent: a model is required")
	}
	if len(opts.Sources) == 0 {
		return nil, errors.New("agent: at least one source is required")
	}
	a := &Agent{
		model: opts.Model, sources: opts.Sources, log: opts.Logger, hc: opts.HTTPClient,
		maxTurns: opts.MaxTurns, system: opts.SystemPrompt,
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.maxTurns <= 0 {
		a.maxTurns = DefaultMaxTurns
	}
	if a.system == "" {
		a.system = defaultSystemPrompt
	}
	return a, nil
}
