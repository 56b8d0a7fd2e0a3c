package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

// TestMountsDoNotCleanPaths: beside mounts (the dev stack's), a path with an empty or dot
// segment still reaches the service, which answers 404 problem+json; nothing is redirected to
// a cleaned path (http.ServeMux's 307), and a mount's own paths are served by the mount.
func TestMountsDoNotCleanPaths(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Ops.AdminAddr = ""
	m := app.NewMain(cfg)
	m.Authenticator = noAuth{}
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	m.Mounts = map[string]http.Handler{"/ui/": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "mounted "+r.URL.Path)
	})}
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
	get := func(method, path string) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"question":"q"}`)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+m.Addr()+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/ask/v1/asks//events"},
		{http.MethodPost, "/ask/v1/conversations//asks"},
		{http.MethodGet, "/ask//v1/asks/t_Y"},
		{http.MethodGet, "/ask/v1/asks/t_X/../t_Y"},
		{http.MethodGet, "/ask/ui/../v1/openapi.yaml"},
		{http.MethodGet, "/ask/ui//page"},
		{http.MethodGet, "/ask//ui/page"},
	} {
		resp, body := get(tc.method, tc.path)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" ||
			resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d %q Location %q: %s; want 404 problem+json", tc.method, tc.path, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("Location"), body)
		}
	}
	if resp, body := get(http.MethodGet, "/ask/ui/page"); resp.StatusCode != http.StatusOK || body != "mounted /page" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the mount: %d %q, nosniff %q", resp.StatusCode, body, resp.Header.Get("X-Content-Type-Options"))
	}
	if resp, _ := get(http.MethodGet, "/ask/ui"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ask/ui/" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the mount's root without its slash: %d Location %q, nosniff %q", resp.StatusCode, resp.Header.Get("Location"),
			resp.Header.Get("X-Content-Type-Options"))
	}
	if resp, _ := get(http.MethodGet, "/ask/v1/openapi.yaml"); resp.StatusCode != http.StatusOK {
		t.Errorf("the service beside the mount: %d", resp.StatusCode)
	}
}
