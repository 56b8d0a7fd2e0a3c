package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpIsNotAnError: askbench -h (and askbench serve -h) print the flags and exit 0, as the
// other commands do; they printed them, then "askbench: flag: help requested", and exited 1.
func TestHelpIsNotAnError(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"serve", "-h"}} {
		var stderr bytes.Buffer
		if err := run(t.Context(), args, &stderr, &stderr); err != nil || !strings.Contains(stderr.String(), "-keepalive") {
			t.Errorf("askbench %s: %v, stderr:\n%s\nwant no error and the flags", strings.Join(args, " "), err, stderr.String())
		}
	}
}
