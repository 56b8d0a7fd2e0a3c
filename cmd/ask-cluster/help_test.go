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
