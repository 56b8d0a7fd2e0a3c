package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// DefaultAdminAddr is where /metrics, /healthz and /readyz are served: loopback, a listener of
// their own, so a gateway in front of the API never exposes them.
const DefaultAdminAddr = "127.0.0.1:9090"

// ops is the operator's side of askd (package obs): the observer that instruments the service,
// its tracer provider, the health probes, and the admin listener's address.
//
//	DAS_ASK_ADMIN_ADDR           admin listener: /metrics, /healthz, /readyz (default
//	                             127.0.0.1:9090; "off" serves none). An address that is set
//	                             and cannot be listened on stops askd; the default, when
//	                             another process (another replica on the same host) holds
//	                             it, is skipped with a warning
//	OTEL_EXPORTER_OTLP_ENDPOINT  traces over OTLP/HTTP when set (and the other standard
//	                             OTEL_* variables); no tracing otherwise
type ops struct {
	obs       *obs.Observer
	tracing   *obs.Tracing
	health    *obs.Health
	adminAddr string
	explicit  bool // adminAddr was configured, not the default
}

func newOps(ctx context.Context, getenv func(string) string, log *slog.Logger, svc server.Config) (*ops, error) {
	p := &ops{adminAddr: strings.TrimSpace(getenv("DAS_ASK_ADMIN_ADDR"))}
	p.explicit = p.adminAddr != ""
	if !p.explicit {
		p.adminAddr = DefaultAdminAddr
	}
	if p.adminAddr != "off" {
		if _, _, err := net.SplitHostPort(p.adminAddr); err != nil {
			return nil, errors.New(`DAS_ASK_ADMIN_ADDR: want host:port, or "off"`)
		}
	}
	var err error
	if p.tracing, err = obs.NewTracing(ctx, obs.TracingOptions{Getenv: getenv}); err != nil {
		return nil, errors.New("OTEL_EXPORTER_OTLP_*: the trace exporter could not be set up: " + err.Error())
	}
	p.obs = obs.New(obs.Options{TracerProvider: p.tracing.Provider, Logger: log.With("component", "obs"), MaxEvents: svc.MaxEvents})
	return p, nil
}

// instrument returns the store to give the server: st (a new in-memory store sized by svc when
// nil, as the server would make), observed. The health probes check the store itself.
func (p *ops) instrument(st store.Store, svc server.Config, jwksReady func() bool) store.Store {
	if st == nil {
		st = store.NewMemory(store.MemoryOptions{TTL: svc.TTL, MaxEvents: svc.MaxEvents})
	}
	p.health = obs.NewHealth(obs.HealthOptions{JWKSReady: jwksReady, Store: st})
	return p.obs.Store(st)
}

// serveAdmin starts the admin listener (unless it is off) and returns its address ("" when
// off or skipped) and how to stop it.
func (p *ops) serveAdmin(log *slog.Logger) (string, func(context.Context) error, error) {
	none := func(context.Context) error { return nil }
	if p.adminAddr == "off" {
		return "", none, nil
	}
	ln, err := net.Listen("tcp", p.adminAddr)
	if err != nil && !p.explicit {
		log.Warn("admin listener not started: its default address is taken; set DAS_ASK_ADMIN_ADDR",
			"admin_addr", p.adminAddr, "err", err)
		return "", none, nil
	}
	if err != nil {
		return "", nil, errors.New("DAS_ASK_ADMIN_ADDR: " + err.Error())
	}
	hs := &http.Server{Handler: obs.AdminHandler(p.obs.Metrics(), p.health), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	stop := func(ctx context.Context) error {
		err := hs.Shutdown(ctx)
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	return ln.Addr().String(), stop, nil
}
