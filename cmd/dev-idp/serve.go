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
	"net/netip"
	"time"

	"github.com/das-ask/ask/demo/idp"
)

// serveCmd runs the IdP until ctx is done.
func serveCmd(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev-idp serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	issuer := fs.String("issuer", "", "issuer URL, the address clients reach this IdP at (default http://<addr>)")
	state := fs.String("state", ".state/idp", `directory keeping the signing keys across restarts ("" = in memory)`)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0 // the flags, printed: what was asked for
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dev-idp serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "dev-idp serve: %v\n", err)
		return 1
	}
	if err := serve(ctx, ln, *issuer, *state, log); err != nil {
		fmt.Fprintf(stderr, "dev-idp serve: %v\n", err)
		return 1
	}
	return 0
}

// serve runs an IdP on ln until ctx is done, then shuts down gracefully. It closes ln.
func serve(ctx context.Context, ln net.Listener, issuer, state string, log *slog.Logger) error {
	defer ln.Close()
	if issuer == "" {
		issuer = "http://" + ln.Addr().String()
	}
	p, err := idp.New(idp.Options{Issuer: issuer, StateDir: state, Logger: log})
	if err != nil {
		return err
	}
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && !ap.Addr().IsLoopback() {
		log.Warn("dev-idp: listening beyond loopback; tokens are still minted for loopback callers only", "addr", ln.Addr().String())
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("dev-idp: serving", "addr", ln.Addr().String(), "issuer", p.Issuer(), "jwks", p.JWKSURL(), "state", state)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serveErr := <-done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
