package obs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// stack is the whole service in process — identity provider, demo source, llm-stub, agent,
// server — instrumented by one Observer, with its admin handler on a server of its own.
type stack struct {
	idp    *idptest.Server
	api    *httptest.Server
	admin  *httptest.Server
	source *httptest.Server
	svc    *server.Server
	spans  *tracetest.InMemoryExporter
	health *obs.Health
	logs   *logtest.Buffer
	client *http.Client
}

func startStack(t *testing.T) *stack {
	t.Helper()
	return startStackWith(t, server.Options{})
}

// startStackWith is startStack with the service's limits (MaxInFlight, MaxTickets,
// MaxConversationsPerID, MaxRetainedPerID, MaxTurns) taken from limits.
func startStackWith(t *testing.T, limits server.Options) *stack {
	t.Helper()
	ctx := t.Context()
	s := &stack{idp: idptest.Start(t), spans: tracetest.NewInMemoryExporter(), logs: &logtest.Buffer{}, client: &http.Client{}}
	t.Cleanup(s.client.CloseIdleConnections)
	log := slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	validator, err := auth.New(ctx, s.idp.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.New(ctx, source.Options{Authenticator: validator})
	if err != nil {
		t.Fatal(err)
	}
	s.source = httptest.NewServer(src.Handler())
	t.Cleanup(func() { s.source.Close(); src.Close() })

	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stubSrv := httptest.NewServer(stub.Handler())
	t.Cleanup(stubSrv.Close)

	tracing, err := obs.NewTracing(ctx, obs.TracingOptions{Exporter: s.spans})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tracing.Shutdown(context.Background()) })
	o := obs.New(obs.Options{TracerProvider: tracing.Provider, Logger: log.With("component", "obs")})

	mdl, err := agent.Config{LLM: agent.LLMStub, BaseURL: stubSrv.URL + "/v1", APIKey: "stub", Model: "stub"}.NewModel(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := agent.New(agent.Options{
		Model:          o.Model(mdl, agent.LLMStub),
		Sources:        []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}},
		TracerProvider: tracing.Provider,
		Logger:         log.With("component", "agent"),
	})
	if err != nil {
		t.Fatal(err)
	}
	mem := store.NewMemory(store.MemoryOptions{})
	s.svc, err = server.New(server.Options{
		Runner: runner, Authenticator: validator, Store: mem, Hooks: o.Hooks(),
		Logger: log.With("component", "ask"), BasePath: "/ask",
		MaxInFlight: limits.MaxInFlight, MaxTickets: limits.MaxTickets, MaxConversationsPerID: limits.MaxConversationsPerID,
		MaxRetainedPerID: limits.MaxRetainedPerID, MaxTurns: limits.MaxTurns,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.api = httptest.NewServer(o.Handler(s.svc.Handler()))
	t.Cleanup(s.api.Close)
	s.health = obs.NewHealth(obs.HealthOptions{JWKSReady: validator.Ready, Store: mem})
	s.admin = httptest.NewServer(obs.AdminHandler(o.Metrics(), s.health))
	t.Cleanup(s.admin.Close)
	t.Cleanup(func() { s.shutdown(t) })
	return s
}

// shutdown stops the service and waits for its runs: after it, every ask has ended and obs
// has recorded it.
func (s *stack) shutdown(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.svc.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// do sends one API request and returns the response with its body read.
func (s *stack) do(t *testing.T, method, path, token string, body any, header http.Header) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.api.URL+"/ask"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (s *stack) conversation(t *testing.T, token string) string {
	t.Helper()
	resp, b := s.do(t, http.MethodPost, "/v1/conversations", token, map[string]any{}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create conversation: %d %s", resp.StatusCode, b)
	}
	var c struct{ ID string }
	json.Unmarshal(b, &c)
	return c.ID
}

// ask puts question in conversation conv and returns the ticket.
func (s *stack) ask(t *testing.T, token, conv, question string) string {
	t.Helper()
	resp, b := s.do(t, http.MethodPost, "/v1/conversations/"+conv+"/asks", token, map[string]any{"question": question}, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create ask: %d %s", resp.StatusCode, b)
	}
	var tk struct{ Ticket string }
	json.Unmarshal(b, &tk)
	return tk.Ticket
}

// events streams the ticket's events until done (the server closes the stream) and returns
// their types; lastEventID, when not "", resumes after it.
func (s *stack) events(t *testing.T, token, ticket, lastEventID string) []string {
	t.Helper()
	h := http.Header{}
	if lastEventID != "" {
		h.Set("Last-Event-ID", lastEventID)
	}
	resp, b := s.do(t, http.MethodGet, "/v1/asks/"+ticket+"/events", token, nil, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	var types []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, v)
		}
	}
	return types
}

// scrape GETs /metrics from the admin handler and parses it.
func (s *stack) scrape(t *testing.T) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, err := s.client.Get(s.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams, string(body)
}

// value is the counter or gauge value of the series of family name with exactly labels (in
// name=value pairs), or the sample count of a histogram; -1 when there is no such series.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if want[lp.GetName()] != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// sum adds the values of every series of family name.
func sum(fams map[string]*dto.MetricFamily, name string) float64 {
	var total float64
	for _, m := range fams[name].GetMetric() {
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// gather reads o's metrics without HTTP.
func gather(t *testing.T, o *obs.Observer) map[string]*dto.MetricFamily {
	t.Helper()
	list, err := o.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return fams
}
