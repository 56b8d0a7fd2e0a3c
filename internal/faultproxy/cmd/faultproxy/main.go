// Command faultproxy runs an internal/faultproxy proxy as a process of its own, for a chaos
// driver that is not Go (a script that puts it between a replica and Redis):
//
//	go run ./internal/faultproxy/cmd/faultproxy --target 127.0.0.1:6379 [--listen 127.0.0.1:0] [--control 127.0.0.1:0]
//
// It prints "proxy <addr>" and "control <url>" on stdout once both listen, then serves the
// control API (see faultproxy.Proxy.Handler: POST /drop?n=1&match=X&then=close, /stall, /pass,
// …; GET /stats) until SIGINT or SIGTERM. Loopback only: the control API has no authentication.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/das-ask/ask/internal/faultproxy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "faultproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("faultproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "host:port to forward to (required)")
	listen := fs.String("listen", "127.0.0.1:0", "address clients dial")
	control := fs.String("control", "127.0.0.1:0", "address of the control API")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("--target is required, and nothing else")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	p := faultproxy.Serve(ln, *target)
	defer p.Close()
	cln, err := net.Listen("tcp", *control)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "proxy %s\ncontrol http://%s\n", p.Addr(), cln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(cln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-served
	return nil
}
