// Command askd is the ask service as an operator deploys it: the handwritten server (package
// server) over the agent (package agent), validating bearers with package auth.
//
// Everything is configured from the environment:
//
//	DAS_ASK_ADDR           listen address (default 127.0.0.1:8080)
//	DAS_LOG_FORMAT         json (default) or text
//	DAS_LOG_LEVEL          debug, info (default), warn or error
//	DAS_ASK_*              the service's settings (see package server)
//	DAS_ASK_STORE          memory (default) or redis://host:port/db: tickets, events and
//	                       conversations shared by every replica (see docs/scale-out.md);
//	                       with DAS_ASK_LEASE_S (default 10) and DAS_ASK_REDIS_PREFIX (default ask:)
//	DAS_JWKS_URL, DAS_ISSUER, DAS_AUDIENCE, DAS_REQUIRED_SCOPE, DAS_JWT_ALGS, DAS_JWT_LEEWAY_S
//	                       bearer validation (see package auth), the same as the sources use
//	ASK_LLM, ASK_LLM_*, DAS_SOURCES, provider keys
//	                       the model and the MCP sources (see package agent)
//	DAS_ASK_ADMIN_ADDR     /metrics, /healthz and /readyz (default 127.0.0.1:9090; "off")
//	OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_*
//	                       traces over OTLP/HTTP when set; none otherwise (see docs/operations.md)
//
// Invalid settings stop it at start with a message naming the variable. SIGINT or SIGTERM stops
// admitting asks, lets running asks finish for DAS_ASK_SHUTDOWN_GRACE_S, ends the rest with
// error{shutdown} and done, and exits; readiness turns false as soon as the signal arrives.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "askd:", err)
		os.Exit(1)
	}
}

// listening is where askd serves: the API, and the admin listener ("" when off).
type listening struct{ API, Admin string }

// run serves until ctx is done. ready, when not nil, receives the listen addresses once serving.
func run(ctx context.Context, getenv func(string) string, stderr io.Writer, ready chan<- listening) error {
	log, err := newLogger(getenv, stderr)
	if err != nil {
		return err
	}
	svcCfg, err := server.ConfigFromEnv()
	if err != nil {
		return err
	}
	op, err := newOps(ctx, getenv, log, svcCfg)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := op.tracing.Shutdown(stopCtx); err != nil {
			log.Warn("spans not all exported", "err", err)
		}
	}()
	storeCfg, err := storeConfigFrom(getenv)
	if err != nil {
		return err
	}
	authCfg, err := auth.ConfigFromEnv()
	if err != nil {
		return err
	}
	agentCfg, err := agent.ConfigFromEnv()
	if err != nil {
		return err
	}
	validator, err := auth.New(ctx, authCfg, auth.Options{Logger: log.With("component", "auth")})
	if err != nil {
		return err
	}
	mdl, err := agentCfg.NewModel(nil, log.With("component", "model"))
	if err != nil {
		return err
	}
	runner, err := agent.New(agent.Options{
		Model: op.obs.Model(mdl, agentCfg.LLM), Sources: agentCfg.Sources, MaxTurns: agentCfg.MaxTurns,
		Phase: agentCfg.Phase, DivergenceTurns: agentCfg.DivergenceTurns,
		Logger: log.With("component", "agent"), TracerProvider: op.tracing.Provider,
	})
	if err != nil {
		return err
	}
	st, closeStore, err := storeCfg.open(ctx, svcCfg, log.With("component", "store"))
	if err != nil {
		return err
	}
	opts := svcCfg.Options()
	opts.Runner, opts.Authenticator, opts.Logger = op.obs.Runner(runner), validator, log.With("component", "ask")
	opts.Store = op.instrument(st, svcCfg, validator.Ready)
	svc, err := server.New(opts)
	if err != nil {
		return errors.Join(err, closeStore())
	}
	defer func() {
		if cerr := closeStore(); cerr != nil {
			log.Warn("store not closed cleanly", "err", cerr)
		}
	}()

	addr := getenv("DAS_ASK_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	adminAddr, stopAdmin, err := op.serveAdmin(log)
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: op.obs.Handler(svc.Handler()), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "admin_addr", adminAddr, "base_path", opts.BasePath, "model", agentCfg.LLM,
		"sources", len(agentCfg.Sources), "tracing", op.tracing.Enabled)
	if ready != nil {
		ready <- listening{API: ln.Addr().String(), Admin: adminAddr}
	}

	select {
	case err := <-served:
		return errors.Join(err, stopAdmin(context.Background()))
	case <-ctx.Done():
	}
	op.health.Drain() // not ready from now on: the load balancer stops sending new asks
	grace := max(svcCfg.ShutdownGrace, 0)
	stopCtx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	err = errors.Join(svc.Shutdown(stopCtx), hs.Shutdown(stopCtx))
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	err = errors.Join(err, stopAdmin(stopCtx))
	log.Info("stopped")
	return err
}

func newLogger(getenv func(string) string, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if v := getenv("DAS_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("DAS_LOG_LEVEL: %q is not debug, info, warn or error", v)
		}
	}
	hopts := &slog.HandlerOptions{Level: level}
	// obs.LogHandler: a line logged with a request's context names its request and trace ids.
	switch f := getenv("DAS_LOG_FORMAT"); f {
	case "", "json":
		return slog.New(obs.LogHandler(slog.NewJSONHandler(w, hopts))), nil
	case "text":
		return slog.New(obs.LogHandler(slog.NewTextHandler(w, hopts))), nil
	default:
		return nil, fmt.Errorf("DAS_LOG_FORMAT: %q is not json or text", f)
	}
}
