// Package stack starts the whole development system in one process: the development identity
// provider, the demo source, the llm-stub and the ask service, each a real server of its
// protocol on its own loopback listener, wired the way an operator would wire them (the service
// and the source validate bearers against the IdP's JWKS; the agent reaches the source and the
// model over HTTP). `make ask-serve` runs it in the foreground; tests and the conformance suite
// start it on ephemeral ports.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/demo/ui"
	"github.com/das-ask/ask/demo/webhooksink"
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

	// Config is the service's configuration (as from config.FromEnv); nil means
	// config.DefaultConfig(). The stack always replaces its Auth (this stack's IdP), its
	// address (AskAddr), the model's address when the model is the llm-stub, and the default
	// sources (the demo source on its dev address) with the demo source started here. Without
	// Observe or AdminAddr it is not observed.
	Config *config.Config
	// Service replaces Config.Service when set; the fields below override it where not zero.
	Service   *server.Config
	BasePath  string
	KeepAlive time.Duration
	MaxEvents int
	Deadline  time.Duration
	TTL       time.Duration

	// Model replaces Config.Agent's model. Nil (or LLM "stub") starts the llm-stub here and
	// points the OpenAI-compatible adapter at it.
	Model *agent.Config
	// StubScript replaces the llm-stub's default script.
	StubScript *llmstub.Script
	// Sources replace the demo source as the agent's sources; nil means Config's, and the
	// default sources mean the demo source started here. The demo source is started either way.
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
	// Observe instruments the service as askd does (package obs: request ids, the per-ask
	// "ask finished" line, metrics, traces) without an admin listener; AdminAddr implies it.
	// Off, the service runs bare, as the bench and the suites measure it.
	Observe bool
	// WebhookAllow adds URL prefixes webhooks may go to, besides the dev sink (on loopback
	// addresses only); WebhookSecret, when set, signs instead of the secret made for this run.
	WebhookAllow  []string
	WebhookSecret string
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
	// WebhooksURL lists the webhook deliveries the dev sink received (…/dev/webhooks/, with
	// its trailing slash); asks may name WebhooksURL+"inbox" as their webhook.
	WebhooksURL string
	// Webhooks is the dev webhook sink.
	Webhooks *webhooksink.Sink

	// IdP mints tokens in process (for tests).
	IdP *idp.IdP
	// Stub is the llm-stub, or nil with a real model; its Requests are the model's log.
	Stub *llmstub.Stub
	// Service is the ask service.
	Service *server.Server
	// Main is the ask service's composition root (package app), as askd runs it.
	Main *app.Main

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
	cfg := config.DefaultConfig()
	if opts.Config != nil {
		cfg = *opts.Config
	}
	if opts.Model != nil {
		cfg.Agent = *opts.Model
		if cfg.Agent.Sources == nil && opts.Config != nil {
			cfg.Agent.Sources = opts.Config.Agent.Sources
		}
	}
	useStub := cfg.Agent.LLM == "" || cfg.Agent.LLM == agent.LLMStub

	// The identity provider.
	lnIdP, err := listen(opts.IdPAddr)
	if err != nil {
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	s.IdPURL = "http://" + lnIdP.Addr().String()
	idpState := ""
	if opts.StateDir != "" {
		idpState = filepath.Join(opts.StateDir, "idp")
	}
	if s.IdP, err = idp.New(idp.Options{Issuer: s.IdPURL, StateDir: idpState, Logger: log.With("component", "idp")}); err != nil {
		lnIdP.Close()
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	s.serve("idp", lnIdP, s.IdP.Handler())

	// One set of auth settings, shared by the service and the source, as in production.
	cfg.Auth.JWKSURL, cfg.Auth.Issuer = s.IdPURL+"/.well-known/jwks.json", s.IdPURL
	cfg.Auth.Audience, cfg.Auth.RequiredScope = idp.DefaultAudience, idp.DefaultScope

	// The demo source.
	lnSrc, err := listen(opts.SourceAddr)
	if err != nil {
		return nil, fmt.Errorf("demo source: %w", err)
	}
	newValidator := func(component string) (*auth.Validator, error) {
		return auth.New(ctx, cfg.Auth, auth.Options{Logger: log.With("component", component)})
	}
	srcAuth, err := newValidator("source")
	if err != nil {
		lnSrc.Close()
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
		lnSrc.Close()
		return nil, fmt.Errorf("demo source: %w", err)
	}
	s.SourceURL = "http://" + lnSrc.Addr().String()
	s.serve("source", lnSrc, s.source.Handler())
	demoSources := []agent.SourceConfig{{Name: "demo", URL: s.SourceURL + "/mcp"}}
	s.SourceURLs = []string{s.SourceURL}
	if opts.Split {
		if err := s.startCatalog(ctx, opts, newValidator); err != nil {
			return nil, err
		}
		demoSources = []agent.SourceConfig{{Name: "catalog", URL: s.CatalogURL + "/mcp"}, {Name: "warehouse", URL: s.SourceURL + "/mcp"}}
		s.SourceURLs = []string{s.CatalogURL, s.SourceURL}
	}
	switch {
	case opts.Sources != nil:
		cfg.Agent.Sources = opts.Sources
	case cfg.Agent.Sources == nil || slices.Equal(cfg.Agent.Sources, agent.DefaultSources):
		cfg.Agent.Sources = demoSources
	}
	// Phase 2 and divergence: Options over the configuration's (which config.FromEnv already
	// gave phase 2's default divergence, or the 0 ASK_DIVERGENCE_TURNS set).
	if opts.Phase == 2 && cfg.Agent.Phase != 2 {
		cfg.Agent.Phase = 2
		if cfg.Agent.DivergenceTurns == 0 {
			cfg.Agent.DivergenceTurns = agent.DefaultDivergenceTurns
		}
	}
	switch {
	case cfg.Agent.Phase != 2 || opts.DivergenceTurns < 0:
		cfg.Agent.DivergenceTurns = 0
	case opts.DivergenceTurns > 0:
		cfg.Agent.DivergenceTurns = opts.DivergenceTurns
	}

	// The model: the llm-stub unless a real one is configured.
	if useStub {
		lnStub, err := listen(opts.StubAddr)
		if err != nil {
			return nil, fmt.Errorf("llm-stub: %w", err)
		}
		if s.Stub, err = llmstub.New(llmstub.Options{Script: opts.StubScript, Logger: log.With("component", "llm-stub")}); err != nil {
			lnStub.Close()
			return nil, fmt.Errorf("llm-stub: %w", err)
		}
		s.StubURL = "http://" + lnStub.Addr().String() + "/v1"
		s.serve("llm-stub", lnStub, s.Stub.Handler())
		cfg.Agent.LLM, cfg.Agent.BaseURL = agent.LLMStub, s.StubURL
		if cfg.Agent.APIKey == "" {
			cfg.Agent.APIKey = "stub"
		}
		if cfg.Agent.Model == "" {
			cfg.Agent.Model = "stub"
		}
	}

	// The ask service, through the same root as askd.
	if opts.Service != nil {
		cfg.Service = *opts.Service
	}
	if opts.BasePath != "" {
		cfg.Service.BasePath = opts.BasePath
	}
	if opts.KeepAlive != 0 {
		cfg.Service.KeepAlive = opts.KeepAlive
	}
	if opts.MaxEvents != 0 {
		cfg.Service.MaxEvents = opts.MaxEvents
	}
	if opts.Deadline != 0 {
		cfg.Service.Deadline = opts.Deadline
	}
	if opts.TTL != 0 {
		cfg.Service.TTL = opts.TTL
	}
	cfg.Addr = opts.AskAddr
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	cfg.Ops.Observe, cfg.Ops.AdminAddr, cfg.Ops.AdminOptional = opts.Observe || opts.AdminAddr != "", opts.AdminAddr, false
	// The ask listener first: the dev webhook sink's URL, which the allow-list names, is on it.
	lnAsk, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("ask service: %w", err)
	}
	s.Main = app.NewMain(cfg)
	s.Main.Logger, s.Main.Listener = log, lnAsk
	// The sink is named by an address the service reaches it at: on a listener of every
	// interface (ask-serve -addr 0.0.0.0:8080), that listener's loopback. Named as the listener
	// is, the allow-list's prefix was http://0.0.0.0:…, which Validate refused (http only to a
	// loopback host), and the stack did not start, blaming DAS_ASK_WEBHOOK_ALLOW.
	sinkAddr := loopbackOf(lnAsk.Addr())
	if ap, err := netip.ParseAddrPort(lnAsk.Addr().String()); err == nil && !ap.Addr().IsLoopback() {
		log.Warn("ask service: listening beyond loopback; the dev sign-in and the dev identity provider still mint tokens for loopback callers only", "addr", lnAsk.Addr().String())
	}
	// The dev webhook sink: asks may name {base}/dev/webhooks/inbox (loopback only), signed with
	// a secret made for this run; the deliveries are listed at {base}/dev/webhooks/.
	sinkPath := strings.TrimSuffix(s.Main.BasePath(), "/") + "/dev/webhooks/"
	secret := opts.WebhookSecret
	if secret == "" {
		secret = devWebhookSecret()
	}
	if s.Webhooks, err = webhooksink.New(secret, log.With("component", "webhook-sink")); err != nil {
		lnAsk.Close()
		s.Main = nil
		return nil, err
	}
	// Beside the operator's settings (DAS_ASK_WEBHOOK_*, read into the configuration as askd
	// reads them): their prefixes and address ranges are allowed too, their secrets sign too.
	wh := s.Main.Config.Webhooks
	wh.Allow = slices.Concat([]string{"http://" + sinkAddr + sinkPath}, wh.Allow, opts.WebhookAllow)
	wh.Secrets = slices.Concat([]string{secret}, wh.Secrets)
	wh.AllowAddrs = slices.Concat([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, wh.AllowAddrs)
	s.Main.Config.Webhooks = wh
	s.Main.Mounts = map[string]http.Handler{"/dev/webhooks/": s.Webhooks}
	if opts.UI {
		s.Main.Mounts["/ui/"] = ui.New(ui.Options{
			SignIn: func(_ context.Context, oid string) (string, error) { return s.IdP.Mint(idp.Claims{OID: oid}) },
			Logger: log.With("component", "ui"),
		})
	}
	if err := s.Main.Run(ctx); err != nil {
		s.Main = nil
		return nil, fmt.Errorf("ask service: %w", err)
	}
	s.Service = s.Main.Server
	s.AskURL = s.Main.URL()
	s.WebhooksURL = "http://" + sinkAddr + sinkPath
	if opts.UI {
		s.UIURL = s.AskURL + "/ui/"
	}
	if a := s.Main.AdminAddr(); a != "" {
		s.AdminURL = "http://" + a
	}

	// auth.New waits for the first JWKS fetch, and the IdP is already serving: a validator that
	// holds no key now would refuse every first request, so say so at once.
	if !srcAuth.Ready() || !s.Main.Ready() || (s.catalogAuth != nil && !s.catalogAuth.Ready()) {
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

// idleTimeout closes the dev stack's kept-alive connections that sit idle, as askd's and
// demo-source's servers do: without one, net/http keeps each until its client closes it.
const idleTimeout = 120 * time.Second

func (s *Stack) serve(name string, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
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
	if s.Main != nil {
		errs = append(errs, s.Main.Close())
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

// devWebhookSecret is a fresh signing secret for one run of the dev stack.
func devWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// loopbackOf is addr as this machine reaches it over loopback: addr itself, unless it is a
// listener's unspecified address (0.0.0.0, ::), which is no address to send to, nor one the
// webhook allow-list admits plain http to.
func loopbackOf(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil || !ap.Addr().IsUnspecified() {
		return addr.String()
	}
	if ap.Addr().Is4() {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port()).String()
	}
	return netip.AddrPortFrom(netip.IPv6Loopback(), ap.Port()).String()
}
