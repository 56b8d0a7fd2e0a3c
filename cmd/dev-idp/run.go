package main

import (
	"context"
	"fmt"
	"io"
)

const usage = `usage:
  dev-idp serve [--addr 127.0.0.1:8090] [--issuer http://127.0.0.1:8090] [--state .state/idp]
  dev-idp token --oid alice [--tid T] [--aud das] [--scope das] [--ttl 1h] [--expired] [--alg RS256|ES256] [--idp $ASK_IDP, else http://127.0.0.1:8090] [--timeout 10s]
`

// run executes one dev-idp command and returns the exit status: 0 on success, 1 when the
// command failed, 2 on a usage error. lookup is the environment (config.Process).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveCmd(ctx, args[1:], stderr)
	case "token":
		return tokenCmd(ctx, args[1:], stdout, stderr, lookup)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "dev-idp: unknown command %q\n%s", args[0], usage)
	return 2
}
