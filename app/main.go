// Package app is the service's one composition root, in the shape of WTF Dial's Main: a
// config.Config goes in, Run builds every part from it and starts serving, Close stops them in
// order. cmd/askd is Main over config.FromEnv; the dev stack (demo/stack) is the IdP, the demo
// source and the llm-stub plus the same Main; the bench child is Main with a synthetic runner.
//
// What is built, in order: the logger's sinks (given), tracing and the observer (package obs,
// when Config.Ops.Observe), the bearer validator (package auth), the model and the agent
// (package agent), the store (store/memory or store/redis, built here only), the API listener,
// the service (package server) and the admin listener.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
)

// Main is the running service. Set Config (and any override) before Run; read the rest after.
// A Main runs once.
type Main struct {
	Config config.Config

	// Logger receives every part's logs, each with a "component" attribute; nil discards.
	Logger *slog.Logger
	// Authenticator replaces the validator built from Config.Auth (the bench shares one with
	// its baselines). Its Ready, when it has one, is the readiness probe's JWKS check.
	Authenticator ask.Authenticator
	// Runner replaces the agent built from Config.Agent (the bench's synthetic runner).
	Runner ask.Runner
	// Mounts are extra handlers on the API listener at {base path}{key} (the dev stack's web
	// page at "/ui/"); keys start with "/" and end with "/". askd mounts nothing.
	Mounts map[string]http.Handler
	// Listener replaces listening on Config.Addr (the dev stack, whose webhook allow-list names
	// the listener's address before the service is built); Close closes it.
	Listener net.Listener
	// IdleTimeout is how long a kept-alive connection, the API's or the admin listener's, may
	// wait for its next request before it is closed (0: DefaultIdleTimeout). net/http's default
	// is none: any client, with no bearer, could hold a connection and its goroutine for good
	// after one request.
	IdleTimeout time.Duration

	// Set by Run.
	Server   *server.Server
	Observer *obs.Observer // nil unless Config.Ops.Observe
	Health   *obs.Health   // nil unless Config.Ops.Observe

	log       *slog.Logger
	ready     func() bool // the validator's JWKS check, or nil
	tracing   *obs.Tracing
	st        store.Store
	closeSt   func() error
	ln        net.Listener
	hs        *http.Server
	served    chan struct{} // closed when the API's Serve returns; serveErr is then its error
	serveErr  error
	done      chan error // Done's: Serve's error, once
	adminLn   net.Listener
	adminHS   *http.Server
	adminDone chan error

	// built is the server Run built, kept after Close clears Server, for EndGrace from any
	// goroutine while Close runs.
	built atomic.Pointer[server.Server]
}

// DefaultIdleTimeout is Main.IdleTimeout's default: above the reference gateway's upstream
// keep-alive (nginx's keepalive_timeout, 60 s by default, which deploy/nginx keeps), so the
// gateway, not the service, ends the idle connections it pools.
const DefaultIdleTimeout = 120 * time.Second

// NewMain returns a Main over cfg.
func NewMain(cfg config.Config) *Main { return &Main{Config: cfg} }

// Run builds the service and starts serving; it returns once both listeners accept
// connections (or with the first error, having released what it built). ctx bounds the start
// only: call Close to stop.
func (m *Main) Run(ctx context.Context) (err error) {
	m.log = m.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.Close())
		}
	}()
	m.ln = m.Listener // closed by Close, as the one Run opens is, should the start fail
	cfg := m.Config
	if cfg.Ops.Observe {
		if cfg.Ops.OTLP {
			// the SDK's own errors (a collector that does not take the spans) as the service's
			// records, not plain text on stderr beside them
			obs.LogLibrary(m.log.With("component", "otel"))
		}
		if m.tracing, err = obs.NewTracing(ctx, obs.TracingOptions{OTLP: cfg.Ops.OTLP}); err != nil {
			return errors.New("OTEL_EXPORTER_OTLP_*: the trace exporter could not be set up: " + err.Error())
		}
		m.Observer = obs.New(obs.Options{TracerProvider: m.tracing.Provider, Logger: m.log.With("component", "obs")})
	}
	// A Redis URL that cannot be used is a setting to correct, said before the JWKS is fetched
	// and anything else starts (openStore would say it only after them).
	if url := cfg.Store.URL; url != "" {
		if err := redisstore.CheckURL(url); err != nil {
			return fmt.Errorf("%w: DAS_ASK_STORE: %w", config.ErrInvalid, err)
		}
	}
	authn := m.Authenticator
	if authn == nil {
		v, err := auth.New(ctx, cfg.Auth, auth.Options{Logger: m.log.With("component", "auth")})
		if err != nil {
			return err
		}
		// New succeeds without keys, so a start stopped during its first fetch (an IdP slow to
		// answer) is seen here, not taken for an IdP away and followed by the listeners.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("DAS_JWKS_URL: the first JWKS fetch: %w", err)
		}
		authn = v
	}
	runner := m.Runner
	if runner == nil {
		if runner, err = m.agent(); err != nil {
			return err
		}
	}
	if m.st, m.closeSt, err = m.openStore(ctx); err != nil {
		return err
	}
	opts := cfg.Service.Options()
	opts.Runner, opts.Authenticator, opts.Logger, opts.Store = runner, authn, m.log.With("component", "ask"), m.st
	if r, ok := authn.(interface{ Ready() bool }); ok {
		m.ready = r.Ready
	}
	if m.Observer != nil {
		m.Health = obs.NewHealth(obs.HealthOptions{JWKSReady: m.ready, Store: m.st})
		opts.Hooks = m.Observer.Hooks()
	}
	if ignored := config.WebhooksIgnored(cfg.Webhooks); len(ignored) > 0 {
		m.log.With("component", "webhook").Warn("webhooks are off (DAS_ASK_WEBHOOK_ALLOW unset), so the other webhook settings are ignored",
			"ignored", strings.Join(ignored, ","))
	}
	if opts.Webhooks.Config = cfg.Webhooks; cfg.Webhooks.Enabled() {
		opts.Webhooks.Logger = m.log.With("component", "webhook")
		if ob, ok := m.st.(store.Outbox); ok {
			opts.Webhooks.Outbox = ob // the store's own: replicas sharing it share deliveries
		}
		if m.Observer != nil {
			opts.Webhooks.Observer = m.Observer.Webhooks()
		}
	}
	if m.ln == nil { // before the server is built: a start that fails here has no asks to shut down
		if m.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return fmt.Errorf("DAS_ASK_ADDR: %w", err)
		}
	}
	if m.Server, err = server.New(opts); err != nil {
		return err
	}
	m.built.Store(m.Server)
	if err := m.serveAdmin(); err != nil {
		return err
	}
	m.hs = &http.Server{Handler: m.handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: m.idleTimeout(), ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)}
	m.served, m.done = make(chan struct{}), make(chan error, 1)
	go func() {
		m.serveErr = m.hs.Serve(m.ln)
		close(m.served) // Close's, which a reader of Done must not take from it
		m.done <- m.serveErr
	}()
	m.log.Info("serving", "addr", m.ln.Addr().String(), "admin_addr", m.AdminAddr(), "base_path", cfg.Service.BasePath,
		"model", cfg.Agent.LLM, "sources", len(cfg.Agent.Sources), "tracing", m.tracing != nil && m.tracing.Enabled)
	return nil
}

// agent builds the model (observed) and the agent over Config.Agent.
func (m *Main) agent() (ask.Runner, error) {
	cfg := m.Config.Agent
	mdl, err := cfg.NewModel(nil, m.log.With("component", "model"))
	if err != nil {
		return nil, err
	}
	opts := agent.Options{Model: mdl, Sources: cfg.Sources, MaxModelCalls: cfg.MaxModelCalls,
		Phase: cfg.Phase, DivergenceTurns: cfg.DivergenceTurns, Logger: m.log.With("component", "agent")}
	if m.Observer != nil {
		opts.Model, opts.TracerProvider = m.Observer.Model(mdl, cfg.LLM), m.tracing.Provider
	}
	return agent.New(opts)
}

// openStore is the one place the service's store is chosen: in memory (server.MemoryStore), or
// Redis, sized by the service's settings.
func (m *Main) openStore(ctx context.Context) (store.Store, func() error, error) {
	svc, sc := m.Config.Service, m.Config.Store
	log := m.log.With("component", "store")
	if sc.URL == "" {
		if ignored := sc.RedisOnly(); len(ignored) > 0 {
			log.Warn("store: in memory (DAS_ASK_STORE=memory), so settings only the Redis store reads are ignored",
				"ignored", strings.Join(ignored, ","))
		}
		warnSharedCapacity(log, svc, 1)
		ms := server.MemoryStore(svc)
		return ms, ms.Close, nil // Close stops its expiry timer and drops what it holds
	}
	// go-redis's own lines (a Sentinel's switch, a pool that cannot dial) as the service's records
	redisstore.LogLibrary(m.log.With("component", "go-redis"))
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := redisstore.New(dialCtx, redisstore.Options{
		URL: sc.URL, Prefix: sc.Prefix, Buckets: sc.Buckets, TTL: svc.TTL, MaxEvents: svc.MaxEvents, Lease: sc.Lease, Logger: log, Seal: sc.Seal,
		CacheBytes: sc.CacheMB << 20,
	})
	if errors.Is(err, redisstore.ErrURL) {
		// as config's own refusals: the setting is wrong, not Redis away (askd exits 2)
		return nil, nil, fmt.Errorf("%w: DAS_ASK_STORE: %w", config.ErrInvalid, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("DAS_ASK_STORE: %w", err)
	}
	log.Info("store: redis", "replica", s.Replica(), "lease", s.Lease().String())
	warnSharedCapacity(log, svc, s.Buckets())
	return s, s.Close, nil
}

// warnSharedCapacity warns when one identity's own cap reaches its share of a store-wide cap:
// DAS_ASK_MAX_TICKETS, for tickets and for conversations, which with the Redis keys spread over
// buckets holds per bucket, as ceil(max/buckets), an identity's all living in one bucket. Then
// one identity, within its caps, fills the store (or its bucket) and every other identity there
// is refused 503 until its tickets expire: the per-identity caps no longer keep one identity
// from taking the capacity others share (docs/scale-out.md). It is a warning, not a refusal: a
// Redis Cluster's defaults (16 buckets: 625 tickets a bucket, 1000 an identity) are such a
// setting.
func warnSharedCapacity(log *slog.Logger, svc server.Config, buckets int) {
	if svc.MaxTickets <= 0 {
		return
	}
	buckets = max(buckets, 1)
	share := (svc.MaxTickets + buckets - 1) / buckets
	for _, c := range []struct {
		name string
		cap  int
	}{{"DAS_ASK_MAX_RETAINED_PER_ID", svc.MaxRetainedPerID}, {"DAS_ASK_MAX_CONVERSATIONS_PER_ID", svc.MaxConversationsPerID}} {
		if c.cap >= share {
			log.Warn("store: one identity can fill the capacity the others share: set DAS_ASK_MAX_TICKETS to at least buckets × (the identity's cap + 1), or lower the cap",
				"variable", c.name, "identity_cap", c.cap, "buckets", buckets, "max_tickets", svc.MaxTickets, "share", share,
				"max_tickets_wanted", buckets*(c.cap+1))
		}
	}
}

// handler is the API listener's handler: the service, the mounts beside it, observed.
func (m *Main) handler() http.Handler {
	var h http.Handler = m.Server.Handler()
	if len(m.Mounts) > 0 {
		h = mount(strings.TrimSuffix(m.basePath(), "/"), m.Mounts, h)
	}
	if m.Observer != nil {
		h = m.Observer.Handler(h)
	}
	return h
}

// mount serves a path under base+key with Mounts[key] (the prefix stripped, up to its last
// "/"), and every other path with service. It is not an http.ServeMux, which cleans every path
// first and answers `//`, `.` and `..` with a 307 to the cleaned path (a client follows it,
// POST and all, to another resource): a path that is not clean, under a mount or not, goes to
// the service, which answers it 404 problem+json. The one redirect kept is ServeMux's courtesy
// for a page: a GET or HEAD of a mount's root without its slash (`/ask/ui`) is sent to it.
func mount(base string, mounts map[string]http.Handler, service http.Handler) http.Handler {
	type mounted struct {
		prefix string // base+key, ending in "/"
		h      http.Handler
	}
	var ms []mounted
	for key, mh := range mounts {
		prefix := base + key
		ms = append(ms, mounted{prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), mh)})
	}
	// Longest first, so a mount inside another is found before it.
	slices.SortFunc(ms, func(a, b mounted) int { return len(b.prefix) - len(a.prefix) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if c := path.Clean(p); p == c || p == c+"/" {
			for _, m := range ms {
				switch {
				case strings.HasPrefix(p, m.prefix):
					// As on every response of the service's (a mount's own 404s, 405s and
					// redirects included), whatever the mount sets.
					w.Header().Set("X-Content-Type-Options", "nosniff")
					m.h.ServeHTTP(w, r)
					return
				case p+"/" == m.prefix && (r.Method == http.MethodGet || r.Method == http.MethodHead):
					w.Header().Set("X-Content-Type-Options", "nosniff")
					target := m.prefix
					if r.URL.RawQuery != "" {
						target += "?" + r.URL.RawQuery
					}
					http.Redirect(w, r, target, http.StatusMovedPermanently)
					return
				}
			}
		}
		service.ServeHTTP(w, r)
	})
}

// serveAdmin starts the admin listener when observed and an address is set. An optional
// address that is taken (another replica on the host holds the default) is skipped with a
// warning.
func (m *Main) serveAdmin() error {
	addr := m.Config.Ops.AdminAddr
	if m.Observer == nil || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil && m.Config.Ops.AdminOptional {
		m.log.Warn("admin listener not started: its default address is taken; set DAS_ASK_ADMIN_ADDR",
			"admin_addr", addr, "err", err)
		return nil
	}
	if err != nil {
		return errors.New("DAS_ASK_ADMIN_ADDR: " + err.Error())
	}
	m.adminLn = ln
	// A kept-alive connection (a scraper's) is let go as the API's are.
	m.adminHS = &http.Server{Handler: obs.AdminHandler(m.Observer.Metrics(), m.Health), ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout: m.idleTimeout(), ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)}
	m.adminDone = make(chan error, 1)
	go func() { m.adminDone <- m.adminHS.Serve(ln) }()
	return nil
}

// idleTimeout is IdleTimeout, or its default.
func (m *Main) idleTimeout() time.Duration {
	if m.IdleTimeout > 0 {
		return m.IdleTimeout
	}
	return DefaultIdleTimeout
}

// BasePath is the service's base path as served ("/ask" by default), before or after Run.
func (m *Main) BasePath() string { return m.basePath() }

func (m *Main) basePath() string {
	p, err := server.CleanBasePath(m.Config.Service.BasePath)
	if err != nil || m.Config.Service.BasePath == "" {
		return server.DefaultBasePath
	}
	return p
}

// Addr is the API listener's address ("" before Run).
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// URL is the service's base URL, base path included, without a trailing slash.
func (m *Main) URL() string { return "http://" + m.Addr() + strings.TrimSuffix(m.basePath(), "/") }

// AdminAddr is the admin listener's address, or "" when there is none.
func (m *Main) AdminAddr() string {
	if m.adminLn == nil {
		return ""
	}
	return m.adminLn.Addr().String()
}

// Ready reports whether the bearer validator holds keys (always true for an Authenticator
// without a Ready method).
func (m *Main) Ready() bool { return m.ready == nil || m.ready() }

// Done reports the API server's end when it stops by itself (a failed Serve); nil before Run.
func (m *Main) Done() <-chan error { return m.done }

// EndGrace ends the shutdown grace of a Close under way (or makes a later Close skip it): the
// asks still running end with error{shutdown} and done at once (server.Server.EndGrace). askd
// calls it on a second SIGINT or SIGTERM. Safe to call more than once, from any goroutine, and
// before Run (it then does nothing).
func (m *Main) EndGrace() {
	if srv := m.built.Load(); srv != nil {
		srv.EndGrace()
	}
}

// Grace is how long Close lets running asks finish: DAS_ASK_SHUTDOWN_GRACE_S, zero when it
// says none.
func (m *Main) Grace() time.Duration {
	if m.Config.Service.ShutdownGrace == 0 {
		return server.DefaultShutdownGrace
	}
	return max(m.Config.Service.ShutdownGrace, 0)
}

// Close stops the service: readiness turns false, admission stops, running asks get the
// shutdown grace (until EndGrace) and then end with error{shutdown} and done, streams close,
// the listeners close, spans are flushed and the store is closed. Safe on a Main whose Run
// failed.
func (m *Main) Close() error {
	if m.Health != nil {
		m.Health.Drain() // the load balancer stops sending new asks
	}
	grace := m.Grace()
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	var errs []error
	served := m.hs != nil // "stopped" only after "serving": a start that failed logs its error alone
	late := false         // the bound passed: said once, with what did not finish in it
	if m.Server != nil {
		if err := m.Server.Shutdown(ctx); err != nil {
			late = ctx.Err() != nil
			if errors.Is(err, server.ErrWebhooksLeft) {
				// Every end was stored and every run had returned or was let go: the bound ran out
				// in the attempts of the deliveries those ends made due (a receiver slow to answer).
				errs = append(errs, fmt.Errorf("stopping: every running ask's end was stored, but the due webhook deliveries were still being attempted after %s (a receiver that did not answer): %w", grace+10*time.Second, context.DeadlineExceeded))
			} else if errors.Is(err, server.ErrRunnersLeft) {
				// Every end was stored: what was left is a run waiting on a source or the model
				// (a tool call in flight completes, bounded by the tool timeout), not the store.
				errs = append(errs, fmt.Errorf("stopping: every running ask's end was stored, but a run still waiting on a source or the model had not returned within %s: %w", grace+10*time.Second, context.DeadlineExceeded))
			} else {
				errs = append(errs, fmt.Errorf("stopping: the running asks' ends were not all stored within %s: %w", grace+10*time.Second, err))
			}
		}
		m.Server = nil
	}
	if m.hs != nil {
		if err := m.hs.Shutdown(ctx); err != nil && !late {
			errs = append(errs, fmt.Errorf("stopping: connections still open after %s: %w", grace+10*time.Second, err))
		}
		<-m.served
		if !errors.Is(m.serveErr, http.ErrServerClosed) {
			errs = append(errs, m.serveErr)
		}
		m.hs = nil
	} else if m.ln != nil {
		errs = append(errs, m.ln.Close())
	}
	m.ln = nil
	if m.adminHS != nil {
		errs = append(errs, m.adminHS.Shutdown(ctx))
		if serr := <-m.adminDone; !errors.Is(serr, http.ErrServerClosed) {
			errs = append(errs, serr)
		}
		m.adminHS, m.adminLn = nil, nil
	}
	if m.tracing != nil {
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.tracing.Shutdown(tctx); err != nil {
			m.log.Warn("spans not all exported", "err", err)
		}
		tcancel()
		m.tracing = nil
	}
	if m.closeSt != nil {
		m.closeStore(ctx)
		m.closeSt = nil
	}
	if served {
		m.log.Info("stopped")
	}
	return errors.Join(errs...)
}

// storeCloseFloor is how long Close waits for the store to close when its own bound has already
// passed (the runs' ends took it all): a store that answers closes in milliseconds.
const storeCloseFloor = 2 * time.Second

// closeStore closes the store within ctx's deadline, or storeCloseFloor when that is nearer
// than it. A Redis that does not answer (frozen, partitioned) holds go-redis's Close for its
// own backstop, 30 s, for the calls still in flight; the process is going, and its end closes
// those connections, so Close does not wait for that: it says so and goes on.
func (m *Main) closeStore(ctx context.Context) {
	closed := make(chan error, 1)
	go func(closeSt func() error) { closed <- closeSt() }(m.closeSt)
	wait := storeCloseFloor
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), wait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-closed:
		if err != nil {
			m.log.Warn("store not closed cleanly", "err", err)
		}
	case <-timer.C:
		m.log.Warn("store not closed in time: its connections end with the process", "waited", wait.String())
	}
}
