package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestDefaultAddrsClearOfDevStack: each receiver's default address runs beside make ask-serve.
// The dev stack's addresses are read from cmd/ask-serve's flags (and its admin example), so a
// port it gains is checked too. Both receivers once defaulted to the dev IdP's and the demo
// source's ports, and failed with "address already in use" beside the dev stack.
func TestDefaultAddrsClearOfDevStack(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "cmd", "ask-serve", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	taken := regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(string(src), -1)
	if len(taken) < 5 {
		t.Fatalf("found %d dev-stack addresses in cmd/ask-serve (%v); the test no longer reads its flags", len(taken), taken)
	}
	py, err := os.ReadFile(filepath.Join("python", "receiver.py"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`else "(127\.0\.0\.1:\d+)"`).FindSubmatch(py)
	if m == nil {
		t.Fatal("receiver.py: no default address found")
	}
	for name, addr := range map[string]string{"Go": defaultAddr, "Python": string(m[1])} {
		if slices.Contains(taken, addr) {
			t.Errorf("the %s receiver's default %s is a port make ask-serve listens on (%v)", name, addr, taken)
		}
	}
	if defaultAddr == string(m[1]) {
		t.Errorf("the Go and Python receivers share the default %s; they cannot run side by side", defaultAddr)
	}
}
