package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/config"
)

// TestRun starts the command on a free port with a script from the environment, asks it for its
// models, and stops it by ending the context.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(path, []byte("models: [from-env]\nrules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--require-auth"}, config.MapEnv(map[string]string{"ASK_STUB_SCRIPT": path}),
			io.Discard, slog.New(slog.DiscardHandler), func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	}

	client := &http.Client{Transport: &http.Transport{}}
	get := func(header string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := get(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401 (--require-auth)", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	resp := get("Bearer k")
	var list struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(list.Data) != 1 || list.Data[0].ID != "from-env" {
		t.Errorf("models %+v, want the script from ASK_STUB_SCRIPT", list)
	}
	client.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run returned %v after cancel, want nil", err)
	}
}

// TestRunErrors: each failure is reported before anything listens (or, for the address, by the
// listen itself).
func TestRunErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := map[string]struct {
		args   []string
		env    map[string]string
		wantIn string
	}{
		"bad flag":       {args: []string{"--nope"}, wantIn: "nope"},
		"extra argument": {args: []string{"serve"}, wantIn: "unexpected"},
		// Each names the setting the value came from: "llmstub: open …: no such file or
		// directory" and "listen tcp: address bad: missing port in address" named none.
		"missing --script": {args: []string{"--script", missing}, wantIn: "-script " + strconv.Quote(missing) + ": "},
		"missing from env": {env: map[string]string{"ASK_STUB_SCRIPT": missing}, wantIn: "ASK_STUB_SCRIPT " + strconv.Quote(missing) + ": "},
		"bad address":      {args: []string{"--addr", "256.0.0.1:1"}, wantIn: `-addr "256.0.0.1:1": `},
		"no port":          {args: []string{"--addr", "bad"}, wantIn: `-addr "bad": `},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := run(t.Context(), tt.args, config.MapEnv(tt.env), io.Discard, slog.New(slog.DiscardHandler), nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("err %v, want one mentioning %q", err, tt.wantIn)
			}
		})
	}
}
