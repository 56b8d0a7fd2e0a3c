package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	askconfig "github.com/das-ask/ask/config"
)

// TestRunRefusesBadSettingsBeforeStarting: an invalid setting stops demo-source before it
// listens, asks the IdP for keys or writes its audit log, in one line naming the flag and its
// variable. DAS_DEMO_SOURCE_ADDR=bad (or a port taken) created the audit log, then failed at
// listen ("listen tcp: address bad: missing port in address"), naming neither; a bad
// DAS_DEMO_SOURCE_RESOURCE_URL was named as "Options.ResourceURL"; an audit path that cannot be
// opened said "open /: is a directory" without the setting; a misspelt DAS_ variable
// (DAS_REQUIRED_SCOPES for DAS_REQUIRED_SCOPE: bearers without the scope accepted) was ignored,
// where askd refuses it.
func TestRunRefusesBadSettingsBeforeStarting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		name  string
		env   map[string]string
		names []string // the environment's names, when not env's
		want  string
	}{
		{"address", map[string]string{"DAS_DEMO_SOURCE_ADDR": "bad"}, nil, `-addr (DAS_DEMO_SOURCE_ADDR) "bad": want host:port`},
		{"port", map[string]string{"DAS_DEMO_SOURCE_ADDR": "127.0.0.1:99999"}, nil, `-addr (DAS_DEMO_SOURCE_ADDR) "127.0.0.1:99999": want host:port`},
		{"taken", map[string]string{"DAS_DEMO_SOURCE_ADDR": taken.Addr().String()}, nil, "address already in use"},
		{"resource", map[string]string{"DAS_DEMO_SOURCE_RESOURCE_URL": "https://u:pw@gw/mcp"}, nil,
			`-resource-url (DAS_DEMO_SOURCE_RESOURCE_URL) "https://u:xxxxx@gw/mcp": want an absolute http(s) URL with no user, query or fragment`},
		{"misspelt", map[string]string{"DAS_REQUIRED_SCOPES": "das"}, []string{"DAS_REQUIRED_SCOPES"},
			"DAS_REQUIRED_SCOPES: no such setting (did you mean DAS_REQUIRED_SCOPE?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			audit := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
			env := map[string]string{"DAS_DEMO_SOURCE_AUDIT": audit, "DAS_DEMO_SOURCE_ADDR": "127.0.0.1:0",
				"DAS_JWKS_URL": "http://127.0.0.1:1/jwks", "DAS_ISSUER": "http://127.0.0.1:1", "DAS_AUDIENCE": "das"}
			names := []string{"DAS_DEMO_SOURCE_AUDIT", "DAS_DEMO_SOURCE_ADDR", "DAS_JWKS_URL", "DAS_ISSUER", "DAS_AUDIENCE"}
			for k, v := range c.env {
				env[k] = v
				names = append(names, k)
			}
			defer func(f func() []string) { environNames = f }(environNames)
			environNames = func() []string { return names }
			err := runOnce(t, env)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw@") {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Dir(audit)); !os.IsNotExist(err) {
				t.Errorf("the audit log's folder was made before the refusal (stat: %v)", err)
			}
		})
	}
	audit := t.TempDir() // a folder: no file can be opened there
	env := map[string]string{"DAS_DEMO_SOURCE_AUDIT": audit, "DAS_DEMO_SOURCE_ADDR": "127.0.0.1:0",
		"DAS_JWKS_URL": "http://127.0.0.1:1/jwks", "DAS_ISSUER": "http://127.0.0.1:1", "DAS_AUDIENCE": "das"}
	want := `-audit (DAS_DEMO_SOURCE_AUDIT) "` + audit + `": `
	if err := run(t.Context(), nil, askconfig.MapEnv(env), io.Discard, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an audit log that cannot be opened: err = %v, want one saying %q", err, want)
	}
}

// runOnce runs demo-source over env and stops it as soon as it serves: run's error, nil when it
// started.
func runOnce(t *testing.T, env map[string]string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- run(ctx, nil, askconfig.MapEnv(env), io.Discard, ready) }()
	select {
	case <-ready:
		cancel()
		<-done
		return nil
	case err := <-done:
		return err
	}
}
