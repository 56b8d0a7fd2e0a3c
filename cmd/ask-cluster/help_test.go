package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestHelpIsNotAnError: ask-cluster -h (scripts/cluster-serve.sh -h) prints its flags and
// exits 0; it printed them, then "cluster: flag: help requested", and exited 1. A flag it does
// not know is still exit 1, named.
func TestHelpIsNotAnError(t *testing.T) {
	var stderr bytes.Buffer
	if code := status(run(t.Context(), []string{"-h"}, io.Discard, &stderr), &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "-replicas") || strings.Contains(stderr.String(), "help requested") {
		t.Errorf("ask-cluster -h: exit %d, stderr:\n%s\nwant 0 and the flags alone", code, stderr.String())
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
