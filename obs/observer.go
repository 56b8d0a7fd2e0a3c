package obs

import (
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of every span obs starts.
const tracerName = "github.com/das-ask/ask/obs"

// Options configure New. Zero values mean defaults.
type Options struct {
	// Metrics receive the measurements; nil means a fresh NewMetrics (see Observer.Metrics).
	Metrics *Metrics
	// TracerProvider starts the spans; nil means no tracing.
	TracerProvider trace.TracerProvider
	// Logger receives the one line per ask ("ask finished") and one line per API request
	// ("request"); nil discards them.
	Logger *slog.Logger
}

// Observer instruments one service instance (see the package documentation). It is safe for
// concurrent use. It starts no goroutine.
type Observer struct {
	m      *Metrics
	tracer trace.Tracer
	log    *slog.Logger

	mu   sync.Mutex
	asks map[string]*askState // admitted here, not yet ended

	toolsMu sync.Mutex
	tools   map[string]map[string]bool // source → the tool names its labels carry (toolLabel)
}

// New returns an Observer.
func New(opts Options) *Observer {
	o := &Observer{m: opts.Metrics, log: opts.Logger, asks: map[string]*askState{}, tools: map[string]map[string]bool{}}
	if o.m == nil {
		o.m = NewMetrics()
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	o.tracer = tp.Tracer(tracerName)
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Metrics are the Observer's metrics.
func (o *Observer) Metrics() *Metrics { return o.m }
