package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpIsNotAnError: clients-stack -h prints the flags and exits 0, as the other commands do;
// it printed them, then "clients-stack: flag: help requested", and exited 1.
func TestHelpIsNotAnError(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &stderr, &stderr); err != nil || !strings.Contains(stderr.String(), "-urls") {
		t.Errorf("clients-stack -h: %v, stderr:\n%s\nwant no error and the flags", err, stderr.String())
	}
}
