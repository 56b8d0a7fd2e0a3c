package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/demo/llmstub"
)

func TestAskdServesAndStops(t *testing.T) {
	idp := idptest.Start(t)
	cfg := idp.Config()
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(stub.Handler())
	defer model.Close()
	env := map[string]string{
		"DAS_JWKS_URL": cfg.JWKSURL, "DAS_ISSUER": cfg.Issuer, "DAS_AUDIENCE": cfg.Audience,
		"DAS_REQUIRED_SCOPE": cfg.RequiredScope, "ASK_LLM": "stub", "ASK_LLM_BASE_URL": model.URL + "/v1",
		"DAS_SOURCES": "demo=http://127.0.0.1:1/mcp", "DAS_ASK_SHUTDOWN_GRACE_S": "0",
		"DAS_ASK_ADMIN_ADDR": "127.0.0.1:0",
		// Never the default port: the dev stack (make ask-serve) may be running beside the tests.
		"DAS_ASK_ADDR": "127.0.0.1:0",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs bytes.Buffer
	ready := make(chan listening, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, os.Getenv, &logs, ready) }()
	var addrs listening
	select {
	case addrs = <-ready:
	case err := <-errc:
		t.Fatalf("askd stopped at start: %v\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("askd did not start")
	}
	base := "http://" + addrs.API + "/ask"
	admin := "http://" + addrs.Admin

	resp, err := http.Get(base + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("contract: %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/v1/conversations", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no bearer: %d %q, want 401 with a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/conversations", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+idp.Token(t, "alice"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("conversation with a valid bearer: %d", resp.StatusCode)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the API's response")
	}

	// The admin listener: ready (the JWKS is loaded, the store answers), alive, and the
	// metrics counted the refused and the admitted conversation.
	for path, want := range map[string]int{"/readyz": http.StatusOK, "/healthz": http.StatusOK, "/metrics": http.StatusOK} {
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("admin %s: %d %s", path, resp.StatusCode, b)
		}
		if path == "/metrics" {
			for _, line := range []string{
				`ask_admission_refusals_total{reason="unauthorized",route="create_conversation"} 1`,
				`ask_http_requests_total{code="201",method="POST",route="create_conversation"} 1`,
			} {
				if !strings.Contains(string(b), line) {
					t.Errorf("/metrics lacks %s", line)
				}
			}
		}
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("the API listener serves /metrics: a gateway would expose it")
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("askd stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("askd did not stop")
	}
	if !strings.Contains(logs.String(), `"msg":"serving"`) {
		t.Errorf("want JSON logs by default, got:\n%s", logs.String())
	}
}

func TestAskdRejectsBadSettings(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no issuer":    {"DAS_JWKS_URL": "http://127.0.0.1:1/jwks", "DAS_AUDIENCE": "das"},
		"bad deadline": {"DAS_ASK_DEADLINE_S": "-3"},
		"bad log":      {"DAS_LOG_FORMAT": "xml"},
		"bad admin":    {"DAS_ASK_ADMIN_ADDR": "everywhere"},
	} {
		t.Run(name, func(t *testing.T) {
			// If a bad setting were only noticed after listening, a fixed port could collide.
			env["DAS_ASK_ADDR"] = "127.0.0.1:0"
			getenv := func(k string) string { return env[k] }
			for k, v := range env {
				t.Setenv(k, v)
			}
			err := run(t.Context(), getenv, io.Discard, nil)
			if err == nil {
				t.Fatal("askd started with bad settings")
			}
			named := false
			for k := range env {
				named = named || strings.Contains(err.Error(), k)
			}
			if !named && !strings.Contains(err.Error(), "DAS_ISSUER") {
				t.Errorf("error %q names no variable", err)
			}
		})
	}
}
