package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpIsNotAnError: ask-cluster -h (scripts/cluster-serve.sh -h) prints its flags and
// exits 0; it printed them, then "cluster: flag: help requested", and exited 1. The usage
// names the command and its chaos subcommand, which it did not ("Usage of cluster:"). A flag
// it does not know is still exit 1, named.
func TestHelpIsNotAnError(t *testing.T) {
	var stderr bytes.Buffer
	if code := status(run(t.Context(), []string{"-h"}, io.Discard, &stderr), &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "-replicas") || strings.Contains(stderr.String(), "help requested") ||
		!strings.Contains(stderr.String(), "usage: ask-cluster [flags]") || !strings.Contains(stderr.String(), "ask-cluster chaos [flags]") {
		t.Errorf("ask-cluster -h: exit %d, stderr:\n%s\nwant 0, the usage of ask-cluster and of ask-cluster chaos, and the flags", code, stderr.String())
	}
	stderr.Reset()
	if code := status(run(t.Context(), []string{"chaos", "-h"}, io.Discard, &stderr), &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "Usage of ask-cluster chaos:") || !strings.Contains(stderr.String(), "-short") {
		t.Errorf("ask-cluster chaos -h: exit %d, stderr:\n%s\nwant 0 and its flags under its own name", code, stderr.String())
	}
	stderr.Reset()
	if code := status(run(t.Context(), []string{"-bogus"}, io.Discard, &stderr), &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "cluster: flag provided but not defined: -bogus") {
		t.Errorf("ask-cluster -bogus: exit %d, stderr:\n%s\nwant 1 and the flag named", code, stderr.String())
	}
}

// TestTryLineNamesAMovedCluster: the banner's make ask line reaches this cluster. On the
// default addresses it is plain make ask; with -gateway or -idp-addr moved (a second cluster
// beside the first, as docs/scale-out.md has it) it carries ASK_URL and ASK_IDP, which it left
// out, so that make ask asked the first cluster.
func TestTryLineNamesAMovedCluster(t *testing.T) {
	for _, tc := range []struct{ gateway, idp, want string }{
		{"http://127.0.0.1:8080/ask", "http://127.0.0.1:8090", `try: make ask Q=`},
		{"http://127.0.0.1:18080/ask", "http://127.0.0.1:8090", `try: ASK_URL=http://127.0.0.1:18080/ask make ask Q=`},
		{"http://127.0.0.1:18080/ask", "http://127.0.0.1:18090", `try: ASK_URL=http://127.0.0.1:18080/ask ASK_IDP=http://127.0.0.1:18090 make ask Q=`},
	} {
		if got := tryLine(tc.gateway, tc.idp); !strings.HasPrefix(got, tc.want) {
			t.Errorf("tryLine(%s, %s) = %q, want it to start %q", tc.gateway, tc.idp, got, tc.want)
		}
	}
}

// TestBadFlagsAreRefusedBeforeStarting: a -lease askd cannot take (DAS_ASK_LEASE_S is whole
// seconds from 1 to 3600) or a port no listener can take is refused before anything starts,
// naming the flag. -lease 1500ms was cut to 1 s unsaid, -lease 500ms became DAS_ASK_LEASE_S=0,
// -lease -5s the default, and -lease 2h and -redis-port 99999 failed only once Redis, the IdP,
// the source and the llm-stub had been built and started.
func TestBadFlagsAreRefusedBeforeStarting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-lease", "1500ms"}, "-lease 1.5s: want whole seconds from 1s to 1h0m0s (DAS_ASK_LEASE_S)"},
		{[]string{"-lease", "500ms"}, "-lease 500ms: want whole seconds"},
		{[]string{"-lease", "-5s"}, "-lease -5s: want whole seconds"},
		{[]string{"-lease", "2h"}, "-lease 2h0m0s: want whole seconds"},
		{[]string{"-redis-port", "99999"}, "-redis-port 99999: want a port from 1 to 65535"},
		{[]string{"-phase", "3"}, "-phase 3: want 1 or 2 (ASK_PHASE)"},
		{[]string{"-replica-port", "65535", "-replicas", "3"}, "-replica-port 65535: with 3 replicas, want a port from 1 to 65533"},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // a cluster that does start stops at once
		dir := filepath.Join(t.TempDir(), "cluster")
		err := run(ctx, append(tc.args, "-dir", dir, "-q"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ask-cluster %s: %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("ask-cluster %s: -dir was written before the refusal (stat: %v)", strings.Join(tc.args, " "), err)
		}
	}
}
