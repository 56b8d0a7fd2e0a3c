package obs

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/das-ask/ask/gen"
)

// namespace prefixes every metric: ask_….
const namespace = "ask"

// durationBuckets span a fast catalog answer (well under a second) to the whole-request
// deadline (120 s by default), in seconds.
var durationBuckets = []float64{0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120, 180}

// fastBuckets are for calls answered in milliseconds to a few seconds: time to ticket, tool calls.
var fastBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics are the service's Prometheus metrics, in a registry of their own (no global state):
// serve them with Handler. All methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	asksRunning   prometheus.Gauge
	asks          *prometheus.CounterVec   // outcome, kind
	askDuration   *prometheus.HistogramVec // outcome
	timeToTicket  prometheus.Histogram
	streamsOpen   prometheus.Gauge
	reconnects    prometheus.Counter
	events        *prometheus.CounterVec // type
	stepsDropped  prometheus.Counter
	toolCalls     *prometheus.CounterVec   // source, tool, refused, outcome
	toolDuration  *prometheus.HistogramVec // source, tool
	modelCalls    *prometheus.CounterVec   // provider
	modelTokens   *prometheus.CounterVec   // provider, direction
	modelErrors   *prometheus.CounterVec   // provider, kind
	modelDuration *prometheus.HistogramVec // provider
	refusals      *prometheus.CounterVec   // route, reason
	requests      *prometheus.CounterVec   // route, method, code
}

// NewMetrics registers the service's metrics, and the Go runtime and process collectors, in a
// new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.asksRunning = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "asks_running",
		Help: "Asks admitted by this replica whose log has not ended."})
	m.asks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "asks_total",
		Help: "Asks ended, by terminal outcome (answer, abstention, refusal, error) and, for errors, kind."},
		[]string{"outcome", "kind"})
	m.askDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "ask_duration_seconds",
		Help: "Time from admission to done, by outcome.", Buckets: durationBuckets}, []string{"outcome"})
	m.timeToTicket = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "time_to_ticket_seconds",
		Help: "Time from receiving POST …/asks to writing its 202 ticket.", Buckets: fastBuckets})
	m.streamsOpen = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "streams_open",
		Help: "Event streams (SSE) currently open."})
	m.reconnects = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "stream_reconnects_total",
		Help: "Event streams opened with a cursor (Last-Event-ID or after): reconnects."})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "events_emitted_total",
		Help: "Events appended to ticket logs, by type."}, []string{"type"})
	m.stepsDropped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "step_events_dropped_total",
		Help: "Step events evicted from a full ticket log (DAS_ASK_MAX_EVENTS): a reader that was behind misses them."})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "tool_calls_total",
		Help: "Tool calls made, by source, tool, whether the source refused, and outcome (ok, error, refused)."},
		[]string{"source", "tool", "refused", "outcome"})
	m.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "tool_call_duration_seconds",
		Help: "Tool call latency as the agent saw it, by source and tool.", Buckets: fastBuckets}, []string{"source", "tool"})
	m.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "model_calls_total",
		Help: "Model calls, by provider, failed or not."}, []string{"provider"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "model_tokens_total",
		Help: "Tokens the provider reported, by provider and direction (input, output)."}, []string{"provider", "direction"})
	m.modelErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "model_errors_total",
		Help: "Failed model calls (after the adapter's retries), by provider and kind."}, []string{"provider", "kind"})
	m.modelDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "model_call_duration_seconds",
		Help: "Model call latency, retries included, by provider.", Buckets: durationBuckets}, []string{"provider"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "admission_refusals_total",
		Help: "Requests to open a conversation or an ask that were refused, by route and reason."}, []string{"route", "reason"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "http_requests_total",
		Help: "API requests, by route template, method and status code."}, []string{"route", "method", "code"})
	m.zero()
	m.reg.MustRegister(m.own()...)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// zero makes the series whose labels are known in advance, at zero: a series that appears only
// at its first increment is one that rate() and increase() miss the start of and an alert on
// it cannot see until then (Prometheus's instrumentation guide, "Avoid missing metrics"). The
// labels that depend on the deployment (a source's tools, a provider) appear when first used.
func (m *Metrics) zero() {
	for _, o := range []gen.EventType{gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal} {
		m.asks.WithLabelValues(string(o), "")
	}
	for _, k := range errorKinds {
		m.asks.WithLabelValues(string(gen.EventTypeError), string(k))
	}
	for _, t := range eventTypes {
		m.events.WithLabelValues(string(t))
	}
	for _, route := range []string{routeCreateConversation, routeCreateAsk} {
		for _, reason := range refusalReasons {
			m.refusals.WithLabelValues(route, reason)
		}
	}
}

// eventTypes are the contract's event types (obs's tests hold the list to its enum).
var eventTypes = []gen.EventType{gen.EventTypeAccepted, gen.EventTypeBranch, gen.EventTypeMilestone, gen.EventTypeStep,
	gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal, gen.EventTypeError, gen.EventTypeDone}

// own lists the service's own metrics (the ask_* ones).
func (m *Metrics) own() []prometheus.Collector {
	return []prometheus.Collector{
		m.asksRunning, m.asks, m.askDuration, m.timeToTicket, m.streamsOpen, m.reconnects, m.events,
		m.stepsDropped, m.toolCalls, m.toolDuration, m.modelCalls, m.modelTokens, m.modelErrors,
		m.modelDuration, m.refusals, m.requests,
	}
}

// Registry is where the metrics are registered, for a test's Gather or extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
