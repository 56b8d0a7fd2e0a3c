// Command dev-idp is the development identity provider (package demo/idp) as a process.
//
//	dev-idp serve [--addr 127.0.0.1:8090] [--issuer http://127.0.0.1:8090] [--state .state/idp]
//	dev-idp token --oid alice [--tid T] [--aud das] [--scope das] [--ttl 1h] [--expired] [--alg RS256|ES256] [--idp http://127.0.0.1:8090] [--timeout 10s]
//
// serve publishes the JWKS and OIDC discovery and mints tokens for loopback callers until
// interrupted; keys persist in --state ("" keeps them in memory). token asks a running dev-idp
// for a token (of the IdP at --idp, default $ASK_IDP, as for the ask CLI, else
// http://127.0.0.1:8090) and prints exactly one line, the token, on stdout; errors go to stderr with a
// non-zero exit status.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/das-ask/ask/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, config.Process)
	stop()
	os.Exit(code)
}
