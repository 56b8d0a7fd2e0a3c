package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp"
)

// tokenCmd asks a running IdP for a token and prints it as the only line on stdout.
// The IdP is --idp, else $ASK_IDP, the ask CLI's: it was always 127.0.0.1:8090, and a caller who
// had exported ASK_IDP for a stack on other addresses was told that no identity provider ran.
func tokenCmd(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	env, err := config.DevIdPTokenFromEnv(lookup)
	if err != nil {
		fmt.Fprintf(stderr, "dev-idp token: %v\n", err)
		return 2
	}
	fs := flag.NewFlagSet("dev-idp token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	oid := fs.String("oid", "", "identity to mint a token for (required), e.g. alice or bob")
	tid := fs.String("tid", "", "tenant (tid); none by default: the same oid in another tenant is another identity")
	aud := fs.String("aud", idp.DefaultAudience, "audience (aud)")
	scope := fs.String("scope", idp.DefaultScope, "scopes, space-separated")
	ttl := fs.Duration("ttl", idp.DefaultTTL, "lifetime, whole seconds, at most 24h")
	expired := fs.Bool("expired", false, "mint a token whose exp has already passed")
	alg := fs.String("alg", idp.RS256, "signing algorithm: RS256 or ES256")
	base := fs.String("idp", env.IdP, "base URL of the running dev-idp (env ASK_IDP)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the IdP")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0 // the flags, printed: what was asked for
	} else if err != nil {
		return 2
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *oid == "" {
		errs = append(errs, errors.New("--oid is required"))
	}
	if *ttl < time.Second || *ttl > idp.MaxTTL || *ttl%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--ttl %s: want whole seconds between 1s and %s", *ttl, idp.MaxTTL))
	}
	if *timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: want a positive duration", *timeout))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "dev-idp token: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	tok, err := idp.RequestToken(ctx, nil, *base, idp.TokenRequest{
		OID: *oid, TID: *tid, Aud: *aud, Scope: *scope, TTLS: int(*ttl / time.Second), Expired: *expired, Alg: *alg,
	})
	if err != nil {
		// Nothing listening is the newcomer's case (make token before make ask-serve): say
		// what starts an identity provider, the dev stack first.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			fmt.Fprintf(stderr, "dev-idp token: %v\n  no identity provider at %s: start the dev stack (make ask-serve), or dev-idp serve alone\n", err, *base)
			return 1
		}
		fmt.Fprintf(stderr, "dev-idp token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}
