package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	askconfig "github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp/idptest"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestRun starts the command on a free port against an in-process identity provider, makes one
// tool call as bob, and stops it: the call is audited to the file and run returns cleanly.
func TestRun(t *testing.T) {
	p := idptest.Start(t)
	cfg := p.Config()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	// The auth settings come from the same environment, read as the ask service reads them.
	env := map[string]string{"DAS_DEMO_SOURCE_AUDIT": audit, "DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer,
		"DAS_AUDIENCE": cfg.Audience, "DAS_REQUIRED_SCOPE": cfg.RequiredScope}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, askconfig.MapEnv(env), io.Discard, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:             "http://" + addr + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{p.Token(t, "bob")}},
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{
		Meta: mcp.Meta{"ask/call_id": "cmd-1"}, Name: "run_query",
		Arguments: map[string]any{"sql": "SELECT sum(amount_eur) FROM oncall_pay"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Meta["ask/refusal"] == nil {
		t.Errorf("bob's query was not refused: %+v", res)
	}
	cs.Close()

	resp, err := http.Get("http://" + addr + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /mcp without a bearer: %s, want 401", resp.Status)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run returned %v after cancel", err)
	}

	f, err := os.Open(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 1 || lines[0]["call_id"] != "cmd-1" || lines[0]["oid"] != "bob" || lines[0]["code"] != "forbidden" {
		t.Errorf("audit file = %v", lines)
	}
}

func TestParseConfig(t *testing.T) {
	env := map[string]string{"DAS_DEMO_SOURCE_ROW_CAP": "50", "DAS_DEMO_SOURCE_ADDR": "127.0.0.1:9999"}
	c, err := parseConfig([]string{"-query-timeout", "2s"}, askconfig.MapEnv(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.rowCap != 50 || c.addr != "127.0.0.1:9999" || c.queryTimeout.String() != "2s" || c.auditPath != ".state/demo-source/audit.jsonl" {
		t.Errorf("config = %+v", c)
	}
	for _, args := range [][]string{{"-row-cap", "0"}, {"extra"}, {"-query-timeout", "soon"}} {
		if _, err := parseConfig(args, askconfig.MapEnv(nil), io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	// A flag is held to its variable's range (README: 1 to 100000000 rows, 1ms to 1h), and the
	// refusal names both: -query-timeout 2h served, where DAS_DEMO_SOURCE_QUERY_TIMEOUT=2h is refused.
	for _, c := range []struct{ args []string }{
		{[]string{"-row-cap", "0"}}, {[]string{"-row-cap", "100000001"}},
		{[]string{"-query-timeout", "2h"}}, {[]string{"-query-timeout", "500us"}}, {[]string{"-query-timeout", "-1s"}},
	} {
		_, err := parseConfig(c.args, askconfig.MapEnv(nil), io.Discard)
		variable := "DAS_DEMO_SOURCE_" + strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(c.args[0], "-"), "-", "_"))
		if err == nil || !strings.Contains(err.Error(), c.args[0]+" ("+variable+")") || !strings.Contains(err.Error(), "want") {
			t.Errorf("%v: error %v, want one naming %s and %s and what it takes", c.args, err, c.args[0], variable)
		}
	}
	for _, args := range [][]string{{"-row-cap", "100000000"}, {"-query-timeout", "1h"}, {"-query-timeout", "1ms"}} {
		if _, err := parseConfig(args, askconfig.MapEnv(nil), io.Discard); err != nil {
			t.Errorf("%v: %v, want it taken (the edge of the range)", args, err)
		}
	}
	// The URL clients reach /mcp at, from the environment or the flag.
	env = map[string]string{"DAS_DEMO_SOURCE_RESOURCE_URL": "https://gw.example/warehouse/mcp"}
	if c, err := parseConfig(nil, askconfig.MapEnv(env), io.Discard); err != nil || c.resourceURL != env["DAS_DEMO_SOURCE_RESOURCE_URL"] {
		t.Errorf("DAS_DEMO_SOURCE_RESOURCE_URL: %+v, %v", c, err)
	}
	if c, err := parseConfig([]string{"-resource-url", "https://gw.example/w/mcp"}, askconfig.MapEnv(env), io.Discard); err != nil || c.resourceURL != "https://gw.example/w/mcp" {
		t.Errorf("-resource-url: %+v, %v", c, err)
	}
	// An invalid value from the environment is refused, naming its variable.
	for k, v := range map[string]string{"DAS_DEMO_SOURCE_ROW_CAP": "many", "DAS_DEMO_SOURCE_QUERY_TIMEOUT": "5"} {
		if _, err := parseConfig(nil, askconfig.MapEnv(map[string]string{k: v}), io.Discard); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want one naming %s", k, v, err, k)
		}
	}
}
