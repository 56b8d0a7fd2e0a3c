// Package stack starts the whole development system in one process: the development identity
// provider, the demo source, the llm-stub and the ask service, each a real server of its
// protocol on its own loopback listener, wired the way an operator would wire them (the service
// and the source validate bearers against the IdP's JWKS; the agent reaches the source and the
// model over HTTP). `make ask-serve` runs it in the foreground; tests and the conformance suite
// start it on ephemeral ports.
package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/demo/ui"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
)

// Options configure Start. Zero values mean: every listener on 127.0.0.1 with an ephemeral
// port, state in memory, the llm-stub with its default script, the service's defaults.
type Options struct {
	// Listen addresses; "" means 127.0.0.1:0.
	AskAddr, IdPAddr, SourceAddr, StubAddr string
	// StateDir keeps the IdP's keys and the source's audit file; "" keeps both in memory.
	StateDir string
	// Logger receives every component's logs, each with a "component" attribute; nil discards.
	Logger *slog.Logger

	// Service is the ask service's configuration (as from server.ConfigFromEnv); nil means the
	// service's defaults. The fields below override it where they are not zero.
	Service   *server.Config
	BasePath  string
	KeepAlive time.Duration
	MaxEvents int
	Deadline  time.Duration
	TTL       time.Duration

	// Model configures a real model instead of the llm-stub. Nil (or LLM "stub") starts the
	// llm-stub here and points the OpenAI-compatible adapter at it.
	Model *agent.Config
	// StubScript replaces the llm-stub's default script.
	StubScript *llmstub.Script
	// Sources replace the demo source as the agent's sources; nil means the demo source started
	// here. The demo source is started either way.
	Sources []agent.SourceConfig
	// Split runs the demo as two sources, each its own MCP server with its own bearer validation
	// and audit log: a catalog source (the glossary) and a warehouse source (the tables), named
	// "catalog" and "warehouse" in the agent's sources. CatalogAddr is the catalog's listen
	// address ("" means 127.0.0.1:0); SourceAddr is then the warehouse's.
	Split       bool
	CatalogAddr string
	// Phase 2 runs the agent with a branch per source and divergence; 0 means Model's phase,
	// else 1.
	Phase int
	// DivergenceTurns caps the catalog-withheld branch's model calls in phase 2: 0 means
	// Model's ASK_DIVERGENCE_TURNS, else agent.DefaultDivergenceTurns; negative means none
	// (divergence null).
	DivergenceTurns int
	// UI serves the reference web page (package demo/ui) at {base}/ui/ on the service's listener,
	// with a development sign-in that mints tokens from this stack's IdP. Off by default; askd
	// never serves it.
	UI bool
	// AdminAddr, when set, instruments the service as askd does (package obs: metrics, request
	// ids, the per-ask log line) and serves /metrics, /healthz and /readyz there, on a
	// listener of its own (e.g. 127.0.0.1:9090). "" means none.
	AdminAddr string
}

// Stack is a running development system. Its URLs have no trailing slash.
type Stack struct {
	// AskURL is the service's base URL, including its base path (e.g. http://127.0.0.1:8080/ask).
	AskURL string
	// IdPURL is the identity provider's issuer URL; JWKS at /.well-known/jwks.json, mint at /token.
	IdPURL string
	// SourceURL is the demo source's root: MCP at /mcp, audit at /audit. With Options.Split it
	// is the warehouse source's (the tables, where a refusal happens).
	SourceURL string
	// CatalogURL is the catalog source's root with Options.Split, else "".
	CatalogURL string
	// SourceURLs are the roots of every demo source started, in the agent's order.
	SourceURLs []string
	// StubURL is the llm-stub's OpenAI-compatible API root (…/v1), or "" with a real model.
	StubURL string
	// UIURL is the reference web page (…/ui/, with its trailing slash), or "" without Options.UI.
	UIURL string
	// AdminURL serves /metrics, /healthz and /readyz, or is "" without Options.AdminAddr.
	AdminURL string

	// IdP mints tokens in process (for tests).
	IdP *idp.IdP
	// Stub is the llm-stub, or nil with a real model; its Requests are the model's log.
	Stub *llmstub.Stub
	// Service is the ask service.
	Service *server.Server

	log     *slog.Logger
	servers []*http.Server
	source  *source.Source
	catalog *source.Source
	// catalogAuth is the catalog source's validator, with Options.Split.
	catalogAuth *auth.Validator
	done        chan error
}

// Start listens, starts every component, and returns once all of them accept connections.
// Close stops them. The context bounds the start only.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Stack{log: log, done: make(chan error, 6)}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	useStub := opts.Model == nil || opts.Model.LLM == "" || opts.Model.LLM == "stub"
	lnIdP, err := listen(opts.IdPAddr)
	if err != nil {
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	lnSrc, err := listen(opts.SourceAddr)
	if err != nil {
		lnIdP.Close()
		return nil, fmt.Errorf("demo source: %w", err)
	}
	var lnStub net.Listener
	if useStub {
		if lnStub, err = listen(opts.StubAddr); err != nil {
			lnIdP.Close()
			lnSrc.Close()
			return nil, fmt.Errorf("llm-stub: %w", err)
		}
	}
	lnAsk, err := listen(opts.AskAddr)
	if err != nil {
		lnIdP.Close()
		lnSrc.Close()
		if lnStub != nil {
			lnStub.Close()
		}
		return nil, fmt.Errorf("ask service: %w", err)
	}
	adm, err := newAdmin(opts.AdminAddr, log)
	if err != nil {
		closeAll(lnIdP, lnSrc, lnStub, lnAsk)
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	defer func() {
		if !ok {
			adm.close()
		}
	}()

	// The identity provider.
	s.IdPURL = "http://" + lnIdP.Addr().String()
	idpState := ""
	if opts.StateDir != "" {
		idpState = filepath.Join(opts.StateDir, "idp")
	}
	if s.IdP, err = idp.New(idp.Options{Issuer: s.IdPURL, StateDir: idpState, Logger: log.With("component", "idp")}); err != nil {
		closeAll(lnSrc, lnStub, lnAsk)
		lnIdP.Close()
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	s.serve("idp", lnIdP, s.IdP.Handler())

	// One set of auth settings, shared by the service and the source, as in production.
	authCfg := auth.Config{
		JWKSURL:       s.IdPURL + "/.well-known/jwks.json",
		Issuer:        s.IdPURL,
		Audience:      idp.DefaultAudience,
		RequiredScope: idp.DefaultScope,
	}
	newValidator := func(component string) (*auth.Validator, error) {
		return auth.New(ctx, authCfg, auth.Options{Logger: log.With("component", component)})
	}

	// The demo source.
	srcAuth, err := newValidator("source")
	if err != nil {
		closeAll(lnSrc, lnStub, lnAsk)
		return nil, fmt.Errorf("demo source auth: %w", err)
	}
	auditPath := ""
	if opts.StateDir != "" {
		auditPath = filepath.Join(opts.StateDir, "demo-source", "audit.jsonl")
	}
	part := source.PartAll
	if opts.Split {
		part = source.PartWarehouse
	}
	if s.source, err = source.New(ctx, source.Options{Authenticator: srcAuth, AuditPath: auditPath, Logger: log.With("component", "source"), Serves: part}); err != nil {
		closeAll(lnSrc, lnStub, lnAsk)
		return nil, fmt.Errorf("demo source: %w", err)
	}
	s.SourceURL = "http://" + lnSrc.Addr().String()
	s.serve("source", lnSrc, s.source.Handler())
	defaultSources := []agent.SourceConfig{{Name: "demo", URL: s.SourceURL + "/mcp"}}
	s.SourceURLs = []string{s.SourceURL}
	if opts.Split {
		if err := s.startCatalog(ctx, opts, newValidator); err != nil {
			closeAll(lnStub, lnAsk)
			return nil, err
		}
		defaultSources = []agent.SourceConfig{{Name: "catalog", URL: s.CatalogURL + "/mcp"}, {Name: "warehouse", URL: s.SourceURL + "/mcp"}}
		s.SourceURLs = []string{s.CatalogURL, s.SourceURL}
	}

	// The model: the llm-stub unless a real one is configured.
	modelCfg := agent.Config{LLM: "stub"}
	if opts.Model != nil {
		modelCfg = *opts.Model
	}
	if useStub {
		if s.Stub, err = llmstub.New(llmstub.Options{Script: opts.StubScript, Logger: log.With("component", "llm-stub")}); err != nil {
			closeAll(lnStub, lnAsk)
			return nil, fmt.Errorf("llm-stub: %w", err)
		}
		s.StubURL = "http://" + lnStub.Addr().String() + "/v1"
		s.serve("llm-stub", lnStub, s.Stub.Handler())
		modelCfg.LLM = "stub"
		modelCfg.BaseURL = s.StubURL
		if modelCfg.APIKey == "" {
			modelCfg.APIKey = "stub"
		}
		if modelCfg.Model == "" {
			modelCfg.Model = "stub"
		}
	}
	mdl, err := modelCfg.NewModel(nil, log.With("component", "model"))
	if err != nil {
		lnAsk.Close()
		return nil, fmt.Errorf("model: %w", err)
	}
	sources := opts.Sources
	if sources == nil {
		sources = defaultSources
	}
	phase, divTurns := modelCfg.Phase, modelCfg.DivergenceTurns
	if opts.Phase == 2 {
		phase = 2
	}
	switch {
	case phase != 2 || opts.DivergenceTurns < 0:
		divTurns = 0
	case opts.DivergenceTurns > 0:
		divTurns = opts.DivergenceTurns
	case divTurns == 0:
		divTurns = agent.DefaultDivergenceTurns
	}
	runner, err := agent.New(agent.Options{Model: adm.model(mdl, modelCfg.LLM), Sources: sources, MaxTurns: modelCfg.MaxTurns, Phase: phase, DivergenceTurns: divTurns, Logger: log.With("component", "agent")})
	if err != nil {
		lnAsk.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}

	// The ask service.
	askAuth, err := newValidator("ask")
	if err != nil {
		lnAsk.Close()
		return nil, fmt.Errorf("ask auth: %w", err)
	}
	var cfg server.Config
	if opts.Service != nil {
		cfg = *opts.Service
	} else if cfg, err = server.LookupConfig(func(string) (string, bool) { return "", false }); err != nil {
		lnAsk.Close()
		return nil, fmt.Errorf("ask service: %w", err)
	}
	if opts.BasePath != "" {
		cfg.BasePath = opts.BasePath
	}
	if opts.KeepAlive != 0 {
		cfg.KeepAlive = opts.KeepAlive
	}
	if opts.MaxEvents != 0 {
		cfg.MaxEvents = opts.MaxEvents
	}
	if opts.Deadline != 0 {
		cfg.Deadline = opts.Deadline
	}
	if opts.TTL != 0 {
		cfg.TTL = opts.TTL
	}
	svcOpts := cfg.Options()
	svcOpts.Runner = adm.runner(runner)
	svcOpts.Authenticator = askAuth
	svcOpts.Logger = log.With("component", "ask")
	adm.options(&svcOpts, cfg)
	if s.Service, err = server.New(svcOpts); err != nil {
		lnAsk.Close()
		return nil, fmt.Errorf("ask service: %w", err)
	}
	base := strings.TrimSuffix(svcOpts.BasePath, "/")
	s.AskURL = "http://" + lnAsk.Addr().String() + base
	askHandler := adm.handler(s.Service.Handler())
	if opts.UI {
		mux := http.NewServeMux()
		mux.Handle(base+"/ui/", http.StripPrefix(base+"/ui", ui.New(ui.Options{
			SignIn: func(_ context.Context, oid string) (string, error) { return s.IdP.Mint(idp.Claims{OID: oid}) },
			Logger: log.With("component", "ui"),
		})))
		mux.Handle("/", askHandler)
		askHandler = mux
		s.UIURL = s.AskURL + "/ui/"
	}
	s.serve("ask", lnAsk, askHandler)
	if adm != nil {
		s.AdminURL = "http://" + adm.ln.Addr().String()
		s.serve("admin", adm.ln, obs.AdminHandler(adm.o.Metrics(), obs.NewHealth(obs.HealthOptions{JWKSReady: askAuth.Ready, Store: adm.mem})))
	}

	// auth.New waits for the first JWKS fetch, and the IdP is already serving: a validator that
	// holds no key now would refuse every first request, so say so at once.
	if !srcAuth.Ready() || !askAuth.Ready() || (s.catalogAuth != nil && !s.catalogAuth.Ready()) {
		return nil, errors.New("the identity provider's JWKS could not be fetched")
	}
	ok = true
	return s, nil
}

func listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

func closeAll(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

func (s *Stack) serve(name string, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.servers = append(s.servers, srv)
	s.log.Info("listening", "component", name, "addr", ln.Addr().String())
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
}

// Close ends every run (error{shutdown} then done, after the service's grace), closes every
// stream and listener, and waits for the servers to stop. Safe to call once.
func (s *Stack) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if s.Service != nil {
		errs = append(errs, s.Service.Shutdown(ctx))
	}
	for i := len(s.servers) - 1; i >= 0; i-- {
		errs = append(errs, s.servers[i].Shutdown(ctx))
	}
	for range s.servers {
		errs = append(errs, <-s.done)
	}
	if s.source != nil {
		errs = append(errs, s.source.Close())
	}
	if s.catalog != nil {
		errs = append(errs, s.catalog.Close())
	}
	return errors.Join(errs...)
}
