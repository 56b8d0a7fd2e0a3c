package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The helper starts the stack with the page mounted next to the service, says where everything
// is, and stops when its context ends (what SIGTERM does).
func TestStackServesThePageBesideTheService(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	file := filepath.Join(t.TempDir(), "urls.json")
	out, w := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-urls", file}, w, io.Discard)
		w.Close()
	}()
	var printed URLs
	if err := json.NewDecoder(out).Decode(&printed); err != nil {
		t.Fatalf("no URLs on stdout: %v (run: %v)", err, <-errc)
	}
	go io.Copy(io.Discard, out)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var written URLs
	if err := json.Unmarshal(b, &written); err != nil || written != printed {
		t.Fatalf("-urls file %q, stdout %+v", b, printed)
	}
	if !strings.HasPrefix(written.UI, written.Ask+"/") {
		t.Errorf("page %s is not under the service %s (same origin, no CORS)", written.UI, written.Ask)
	}

	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(written.UI); code != http.StatusOK || !strings.Contains(body, "app.js") {
		t.Errorf("GET the page: %d", code)
	}
	if code, _ := get(written.Ask + "/v1/openapi.yaml"); code != http.StatusOK {
		t.Errorf("GET the contract beside the page: %d", code)
	}
	resp, err := http.PostForm(written.UI+"token", url.Values{"oid": {"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("sign-in: %d %v", resp.StatusCode, err)
	}
	// The minted token is accepted by the service.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, written.Ask+"/v1/conversations", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("create a conversation with the page's token: %d", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop after its context ended")
	}
}

// An argument is refused before the stack starts. It was ignored: "-v false" (-v, then an
// argument "false") started a stack logging at info; the context's deadline bounds the failure.
func TestStackRefusesArguments(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := run(ctx, []string{"-addr", "127.0.0.1:0", "-v", "false"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "false"`) {
		t.Fatalf("run -v false: %v, want the argument refused", err)
	}
	if ctx.Err() != nil {
		t.Fatal("run -v false served until its context ended")
	}
}
