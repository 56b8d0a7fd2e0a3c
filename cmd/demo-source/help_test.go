package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpIsNotAnError: demo-source -h prints its flags and exits 0, as the other commands do;
// it printed them, then "demo-source: flag: help requested", and exited 1. A flag it does not
// know is still exit 1, named.
func TestHelpIsNotAnError(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	var stderr bytes.Buffer
	if code := status(run(t.Context(), []string{"-h"}, none, &stderr, nil), &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "-row-cap") || strings.Contains(stderr.String(), "help requested") {
		t.Errorf("demo-source -h: exit %d, stderr:\n%s\nwant 0 and the flags alone", code, stderr.String())
	}
	stderr.Reset()
	if code := status(run(t.Context(), []string{"-bogus"}, none, &stderr, nil), &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "demo-source: flag provided but not defined: -bogus") {
		t.Errorf("demo-source -bogus: exit %d, stderr:\n%s\nwant 1 and the flag named", code, stderr.String())
	}
}
