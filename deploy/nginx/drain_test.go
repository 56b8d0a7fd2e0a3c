package nginx_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
	"github.com/das-ask/ask/server"
)

// TestGatewayPassesADrainingRefusalOn: a replica that drains answers a create 421 when the
// gateway sends server.RerouteHeader (server/problem.go), and the gateway passes the 421 to the
// next replica, the same method and body, three times at most with the header and then once
// without it, whose answer (a draining replica's 503 and Retry-After) the client gets: nginx
// may choose the draining replica again (round-robin over them all), or reach another
// draining. nginx cannot
// pass a POST's 503 on; before this, a rolling restart through the gateway answered some
// creates 503 (TestClusterRollingRestart in cmd/ask-cluster). Requests nginx cannot pass again safely
// carry no header: a POST without a Content-Length, and every GET (a client's own header of
// that name is not passed on). The service's own refusals pass untouched.
func TestGatewayPassesADrainingRefusalOn(t *testing.T) {
	type attempt struct {
		method, body, reroute string
	}
	var mu sync.Mutex
	var attempts []attempt
	drainingFor := 0 // how many attempts reach a draining replica: 421 with the header, 503 without
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		attempts = append(attempts, attempt{r.Method, string(b), r.Header.Get(server.RerouteHeader)})
		n := len(attempts)
		mu.Unlock()
		switch {
		case r.URL.Path == "/ask/v1/conversations/c_bad/asks":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"title":"Bad Request","status":400,"detail":"the service's own"}`)
		case n <= drainingFor && r.Header.Get(server.RerouteHeader) != "":
			w.WriteHeader(http.StatusMisdirectedRequest)
		case n <= drainingFor:
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(upstream.Close)
	addr := nginxtest.Start(t, strings.TrimPrefix(upstream.URL, "http://"))
	const body = `{"question":"q"}`

	for _, tc := range []struct {
		name        string
		draining    int
		key         string
		chunked     bool
		path        string
		wantStatus  int
		wantReroute []string // each attempt's X-Ask-Reroute
	}{
		{"a create, its replica draining", 1, "", false, "/ask/v1/conversations/c_1/asks", http.StatusAccepted, []string{"1", "1"}},
		{"a keyed create, its replica draining", 1, "k-1", false, "/ask/v1/conversations/c_1/asks", http.StatusAccepted, []string{"1", "1"}},
		{"a create, two replicas draining", 2, "", false, "/ask/v1/conversations/c_1/asks", http.StatusAccepted, []string{"1", "1", "1"}},
		{"a keyed create, a draining replica chosen four times", 4, "k-3", false, "/ask/v1/conversations/c_1/asks", http.StatusAccepted, []string{"1", "1", "1", "1", ""}},
		{"a create, every replica draining", 5, "", false, "/ask/v1/conversations/c_1/asks", http.StatusServiceUnavailable, []string{"1", "1", "1", "1", ""}},
		{"a chunked create", 1, "", true, "/ask/v1/conversations/c_1/asks", http.StatusServiceUnavailable, []string{""}},
		{"a keyed chunked create", 1, "k-2", true, "/ask/v1/conversations/c_1/asks", http.StatusServiceUnavailable, []string{""}},
		{"the service's 400", 0, "", false, "/ask/v1/conversations/c_bad/asks", http.StatusBadRequest, []string{"1"}},
		{"a status read", 0, "", false, "/ask/v1/asks/t_1", http.StatusAccepted, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			attempts, drainingFor = nil, tc.draining
			mu.Unlock()
			method := http.MethodPost
			var rd io.Reader = strings.NewReader(body)
			if tc.path == "/ask/v1/asks/t_1" {
				method, rd = http.MethodGet, nil
			} else if tc.chunked {
				rd = io.MultiReader(strings.NewReader(body)) // a reader of unknown length: chunked
			}
			req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+tc.path, rd)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(server.RerouteHeader, "from-the-client")
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, got)
			}
			if tc.wantStatus == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "5" {
				t.Errorf("the draining replica's 503 without its Retry-After: %q", resp.Header.Get("Retry-After"))
			}
			if tc.wantStatus == http.StatusBadRequest && !strings.Contains(string(got), "the service's own") {
				t.Errorf("the service's 400 replaced by the gateway: %s", got)
			}
			mu.Lock()
			defer mu.Unlock()
			var reroutes []string
			for _, a := range attempts {
				reroutes = append(reroutes, a.reroute)
				if method == http.MethodPost && (a.method != method || a.body != body) {
					t.Errorf("an attempt sent %s %q, want %s %q", a.method, a.body, method, body)
				}
			}
			if strings.Join(reroutes, ",") != strings.Join(tc.wantReroute, ",") {
				t.Errorf("attempts' %s: %q, want %q", server.RerouteHeader, reroutes, tc.wantReroute)
			}
		})
	}
}
