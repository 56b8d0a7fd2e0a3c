// Command demo-source serves the demo source (package demo/source): an MCP server over an
// embedded, read-only SQLite dataset with a glossary catalog, its own bearer validation,
// per-identity permissions and an append-only audit log.
//
//	demo-source [-addr 127.0.0.1:8091] [-audit .state/demo-source/audit.jsonl] [-row-cap 500] [-query-timeout 5s]
//
// Every flag can also be set in the environment (flags win): DAS_DEMO_SOURCE_ADDR,
// DAS_DEMO_SOURCE_AUDIT, DAS_DEMO_SOURCE_ROW_CAP, DAS_DEMO_SOURCE_QUERY_TIMEOUT,
// DAS_DEMO_SOURCE_SERVES, DAS_DEMO_SOURCE_RESOURCE_URL. Bearers are
// validated with the shared DAS_* settings (DAS_JWKS_URL, DAS_ISSUER, DAS_AUDIENCE,
// DAS_REQUIRED_SCOPE, DAS_JWT_ALGS, DAS_JWT_LEEWAY_S), exactly as the ask service validates
// them; when none of DAS_JWKS_URL, DAS_ISSUER and DAS_AUDIENCE is set, the development
// identity provider's settings (127.0.0.1:8090, audience and scope `das`) are used and a
// warning says so.
//
// It serves MCP at /mcp, its protected resource metadata (RFC 9728) at GET
// /.well-known/oauth-protected-resource/mcp, the audit log at GET /audit (loopback callers
// only) and GET /healthz, and stops cleanly on SIGINT or SIGTERM. Behind a gateway that mounts
// /mcp at another URL, -resource-url names it, so that the metadata and every 401's challenge
// name the URL clients use.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/das-ask/ask/auth"
	askconfig "github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := status(run(ctx, os.Args[1:], askconfig.Process, os.Stderr, nil), os.Stderr)
	stop()
	os.Exit(code)
}

// status says run's error on stderr and gives the exit status: 0 for none and for -h, whose
// usage the flag set has printed (not an error to report), 1 otherwise.
func status(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "demo-source:", err)
	return 1
}

// config is the command line, after the environment (package config) filled in what flags
// left unset.
type config struct {
	addr         string
	auditPath    string
	rowCap       int
	queryTimeout time.Duration
	serves       string
	resourceURL  string
	auth         auth.Config
	devAuth      bool // no DAS_JWKS_URL, DAS_ISSUER or DAS_AUDIENCE: the dev IdP's settings
}

func parseConfig(args []string, lookup func(string) (string, bool), stderr io.Writer) (config, error) {
	env, err := askconfig.DemoSourceFromEnv(lookup)
	if err != nil {
		return config{}, err
	}
	if env.RowCap == 0 {
		env.RowCap = source.DefaultRowCap
	}
	if env.QueryTimeout == 0 {
		env.QueryTimeout = source.DefaultQueryTimeout
	}
	c := config{auth: env.Auth, devAuth: env.DevAuth}
	fs := flag.NewFlagSet("demo-source", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", env.Addr, "listen address")
	fs.StringVar(&c.auditPath, "audit", env.Audit, "append-only audit log file (JSON lines)")
	fs.IntVar(&c.rowCap, "row-cap", env.RowCap, "most rows one query returns")
	fs.DurationVar(&c.queryTimeout, "query-timeout", env.QueryTimeout, "time limit of one query")
	fs.StringVar(&c.serves, "serves", env.Serves, "what to serve: all, catalog (the glossary) or warehouse (the tables)")
	fs.StringVar(&c.resourceURL, "resource-url", env.ResourceURL,
		"the URL clients reach /mcp at, behind a gateway that mounts it elsewhere (the protected resource metadata's resource); default: each request's own")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if _, err := source.ParsePart(c.serves); err != nil {
		return config{}, fmt.Errorf("-serves (DAS_DEMO_SOURCE_SERVES) %q: want all, catalog or warehouse", c.serves)
	}
	// The flags are held to the variables' ranges (README): -query-timeout 2h served, where
	// DAS_DEMO_SOURCE_QUERY_TIMEOUT=2h is refused, and -row-cap 0 named neither its variable nor
	// what it takes.
	if c.rowCap < 1 || c.rowCap > askconfig.DemoSourceMaxRowCap {
		return config{}, fmt.Errorf("-row-cap (DAS_DEMO_SOURCE_ROW_CAP) %d: want a whole number from 1 to %d", c.rowCap, askconfig.DemoSourceMaxRowCap)
	}
	if c.queryTimeout < askconfig.DemoSourceMinQueryTimeout || c.queryTimeout > askconfig.DemoSourceMaxQueryTimeout {
		return config{}, fmt.Errorf("-query-timeout (DAS_DEMO_SOURCE_QUERY_TIMEOUT) %v: want a duration such as 5s, from %v to %v",
			c.queryTimeout, askconfig.DemoSourceMinQueryTimeout, askconfig.DemoSourceMaxQueryTimeout)
	}
	// Checked here, before anything starts: at listen, a bad address was found after the audit
	// log was made and the IdP asked, and named neither flag nor variable.
	if !askconfig.ListenAddrValid(c.addr) {
		return config{}, fmt.Errorf("-addr (DAS_DEMO_SOURCE_ADDR) %q: want host:port", c.addr)
	}
	if !source.ResourceURLValid(c.resourceURL) {
		return config{}, fmt.Errorf("-resource-url (DAS_DEMO_SOURCE_RESOURCE_URL) %q: %s", redact.URL(c.resourceURL), source.ResourceURLWant)
	}
	// A misspelt DAS_ name is refused, as askd refuses it: DAS_REQUIRED_SCOPES for
	// DAS_REQUIRED_SCOPE left bearers without the scope accepted, unsaid.
	if err := askconfig.Unknown(environNames()); err != nil {
		return config{}, err
	}
	return c, nil
}

// run serves until ctx is done. lookup supplies the DAS_DEMO_SOURCE_* settings and the shared
// auth settings. ready, when not nil, receives the listening address.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stderr io.Writer, ready chan<- string) error {
	c, err := parseConfig(args, lookup, stderr)
	if err != nil {
		return err
	}
	// Listen first: an address another holds stops the start before the IdP is asked or the
	// audit log made.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("-addr (DAS_DEMO_SOURCE_ADDR): %w", err)
	}
	defer ln.Close() // idempotent: also closed by the server once it serves
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "demo-source")
	if c.devAuth {
		log.Warn("no DAS_JWKS_URL, DAS_ISSUER or DAS_AUDIENCE set: trusting the development identity provider",
			"issuer", auth.DevIssuer, "jwks_url", auth.DevJWKSURL)
	}
	validator, err := auth.New(ctx, c.auth, auth.Options{Logger: log})
	if err != nil {
		return err
	}
	part, _ := source.ParsePart(c.serves)
	src, err := source.New(ctx, source.Options{
		Authenticator: validator,
		AuditPath:     c.auditPath,
		RowCap:        c.rowCap,
		QueryTimeout:  c.queryTimeout,
		Logger:        log,
		Serves:        part,
		ResourceURL:   c.resourceURL,
	})
	if errors.Is(err, source.ErrAudit) {
		return fmt.Errorf("-audit (DAS_DEMO_SOURCE_AUDIT) %q: %w", c.auditPath, err)
	}
	if err != nil {
		return err
	}
	defer src.Close()

	srv := httpServer(ctx, src.Handler(), log)
	log.Info("demo source serving", "mcp", "http://"+ln.Addr().String()+"/mcp", "audit_file", c.auditPath,
		"issuer", c.auth.Issuer, "row_cap", c.rowCap, "query_timeout", c.queryTimeout)
	if ready != nil {
		ready <- ln.Addr().String()
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("demo source stopping")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Streams still open after the grace period (an MCP client's standalone SSE stream)
		// are cut: they carry no work, every tool call is a request of its own.
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("demo source stopped")
	return nil
}

// idleTimeout closes a kept-alive connection that waits this long for its next request, as
// askd's (app.DefaultIdleTimeout): net/http's zero IdleTimeout falls back to ReadTimeout, which
// is zero here (it would end every event stream), so an idle connection was never closed.
const idleTimeout = 120 * time.Second

// httpServer is the source's HTTP server, with askd's timeouts: 10 s for a request's header, 120 s
// for an idle keep-alive connection. A body's time is the handler's (source.Options.BodyReadTimeout);
// no ReadTimeout or WriteTimeout, which would end the MCP session's event streams.
func httpServer(ctx context.Context, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// environNames lists the names the environment sets, for askconfig.Unknown; tests replace it.
var environNames = askconfig.ProcessNames
