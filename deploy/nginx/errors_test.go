package nginx_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
	"github.com/das-ask/ask/internal/loopback"
)

// startNginx runs nginx on the checked-in config, rendered with upstream as its one server,
// and returns the gateway's base URL.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	return "http://" + nginxtest.Start(t, upstream)
}

// checkProblem checks that resp is the gateway's own problem+json with status, Retry-After and
// a detail.
func checkProblem(t *testing.T, what string, resp *http.Response, status int) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(body, &p) != nil || p.Status != status || p.Detail == "" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: %d %s %q (Retry-After %q), want %d problem+json with its status, a detail and Retry-After",
			what, resp.StatusCode, resp.Header.Get("Content-Type"), body, resp.Header.Get("Retry-After"), status)
	}
	checkRequestID(t, what, resp)
}

// checkRequestID checks that resp carries nginx's $request_id (32 hex digits) as X-Request-Id,
// as the service's own answers carry theirs.
func checkRequestID(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	id := resp.Header.Values("X-Request-Id")
	if len(id) != 1 || len(id[0]) != 32 || strings.Trim(id[0], "0123456789abcdef") != "" {
		t.Errorf("%s: X-Request-Id %q, want nginx's request id", what, id)
	}
}

// TestGatewayErrorsAreProblems: what nginx answers itself — no replica reachable, none
// answering in time — is problem+json with Retry-After, like the service's refusals, for a
// GET, a POST with or without an Idempotency-Key and the event stream alike.
func TestGatewayErrorsAreProblems(t *testing.T) {
	down := startNginx(t, loopback.Refused(t)+" max_fails=0") // nothing listens there, for good
	requests := func(base string) map[string]*http.Request {
		get, _ := http.NewRequest(http.MethodGet, base+"/ask/v1/asks/tkt_x", nil)
		stream, _ := http.NewRequest(http.MethodGet, base+"/ask/v1/asks/tkt_x/events", nil)
		post, _ := http.NewRequest(http.MethodPost, base+"/ask/v1/conversations", strings.NewReader("{}"))
		keyed, _ := http.NewRequest(http.MethodPost, base+"/ask/v1/conversations", strings.NewReader("{}"))
		keyed.Header.Set("Idempotency-Key", `"k1"`)
		return map[string]*http.Request{"GET": get, "the stream": stream, "a POST": post, "a keyed POST": keyed}
	}
	for what, req := range requests(down) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		checkProblem(t, "no replica, "+what, resp, http.StatusBadGateway)
	}

	// A replica that takes the connection and never answers: nginx's read timeout (5 s for
	// every call but the stream and long polls).
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held <- c // kept open, unanswered, until the test ends
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		<-accepted
		close(held)
		for c := range held {
			_ = c.Close()
		}
	})
	frozen := startNginx(t, silent.Addr().String())
	resp, err := http.DefaultClient.Do(requests(frozen)["a POST"])
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, "a frozen replica, a POST", resp, http.StatusGatewayTimeout)
}

// TestGatewayRefusalsAreProblems: what nginx refuses itself before any replica sees the
// request — a body over client_max_body_size, two Authorization headers, a request line it
// cannot parse, a URI too long, a header block too large, a method it never proxies, a
// Transfer-Encoding it does not read, an HTTP version it does not serve, a path outside the
// mount point — is problem+json with the status in
// its body, as the service's own refusals are; the contract declares 413 and 400 as
// problem+json, and a client reads every refusal one way.
func TestGatewayRefusalsAreProblems(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"upstream","status":418,"detail":"reached the replica"}`)
	}))
	t.Cleanup(upstream.Close)
	base := startNginx(t, strings.TrimPrefix(upstream.URL, "http://"))
	addr := strings.TrimPrefix(base, "http://")
	for _, tt := range []struct {
		what   string
		raw    string // the request as sent, with its body
		status int
	}{
		{"a body over client_max_body_size", "POST /ask/v1/conversations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 90000\r\n\r\n" +
			`{"question":"` + strings.Repeat("a", 90000-15) + `"}`, http.StatusRequestEntityTooLarge},
		{"two Authorization headers", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n", http.StatusBadRequest},
		{"a NUL in the path", "GET /ask/v1/asks/t%00x HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"a URI too long", "GET /ask/v1/asks/" + strings.Repeat("a", 40000) + " HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusRequestURITooLong},
		{"TRACE", "TRACE /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusMethodNotAllowed},
		// A path of no operation: the service's 404, not a 405 with no method to name.
		{"TRACE on a path of no operation", "TRACE /ask/v1/nope HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"TRACE outside the mount", "TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"a Transfer-Encoding other than chunked", "POST /ask/v1/conversations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", http.StatusNotImplemented},
		{"an HTTP version other than 1.x", "GET /ask/v1/asks/t_x HTTP/2.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		// Past large_client_header_buffers (a line over 32 KiB, a block over 128 KiB, or more
		// lines than nginx keeps: a thousand of a few bytes each): askd's 431, as problem+json.
		{"a header block too large", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Big: "+strings.Repeat("a", 30<<10)+"\r\n", 6) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"a header line too long", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"a thousand header lines", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-H: v\r\n", 1000) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		// Outside the mount point the gateway has nothing: not the static root nginx serves by
		// default (with the Debian package, its "Welcome to nginx!" page at /), nor its HTML 404.
		{"the root", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"a path outside the mount", "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"a PUT outside the mount", "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", http.StatusNotFound},
		{"the mount in other case", "GET /ASK/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"an internal location", "GET /_ask_bad_request HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
	} {
		resp := rawRequest(t, addr, tt.raw)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var p struct {
			Type, Title, Detail string
			Status              int
		}
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(body, &p) != nil || p.Status != tt.status || p.Detail == "" || p.Title == "" {
			t.Errorf("%s: %d %s %q, want %d problem+json with its status, a title and a detail",
				tt.what, resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.status)
		}
		if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
			t.Errorf("%s: a 405 without Allow (RFC 9110 §15.5.6)", tt.what)
		}
		if tt.status == http.StatusRequestEntityTooLarge && !strings.Contains(p.Detail, "at most 81920 bytes") {
			t.Errorf("%s: detail %q does not name the limit, as the service's 413 does", tt.what, p.Detail)
		}
		checkRequestID(t, tt.what, resp)
	}
}

// TestGatewayOverTLSRefusesPlainHTTPWithAProblem: plain HTTP sent to the gateway's TLS listener
// (ask.conf's TLS lines) is a 400 problem+json, as every other refusal of the gateway's, not
// nginx's HTML page ("The plain HTTP request was sent to HTTPS port").
func TestGatewayOverTLSRefusesPlainHTTPWithAProblem(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(upstream.Close)
	addr, _ := nginxtest.StartTLS(t, strings.TrimPrefix(upstream.URL, "http://"))
	resp := rawRequest(t, addr, "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n\r\n")
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var p struct {
		Title, Detail string
		Status        int
	}
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(body, &p) != nil || p.Status != http.StatusBadRequest || p.Detail == "" || p.Title == "" {
		t.Errorf("plain HTTP to the TLS listener: %d %s %q, want 400 problem+json with its status, a title and a detail",
			resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	checkRequestID(t, "plain HTTP to the TLS listener", resp)
}

// TestGatewayPassesHeadersAsSent: the headers the service reads are passed as the client sent
// them, so that the service, not the gateway, decides: two Last-Event-ID or Idempotency-Key
// headers reach it as two (a 400 there; the first alone would be taken as the only one), and an
// empty Last-Event-ID as empty (a 400; dropped, the stream would start at seq 1).
func TestGatewayPassesHeadersAsSent(t *testing.T) {
	got := make(chan http.Header, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(upstream.Close)
	base := startNginx(t, strings.TrimPrefix(upstream.URL, "http://"))
	addr := strings.TrimPrefix(base, "http://")
	for _, tt := range []struct {
		what, raw string
		name      string
		want      []string
	}{
		{"two Last-Event-ID", "GET /ask/v1/asks/t_x/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 1\r\nLast-Event-ID: 2\r\n\r\n", "Last-Event-Id", []string{"1", "2"}},
		{"an empty Last-Event-ID", "GET /ask/v1/asks/t_x/events HTTP/1.1\r\nHost: x\r\nLast-Event-ID:\r\n\r\n", "Last-Event-Id", []string{""}},
		{"two Idempotency-Key", "POST /ask/v1/conversations HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\nContent-Length: 2\r\n\r\n{}", "Idempotency-Key", []string{"a", "b"}},
		{"two Prefer", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nPrefer: wait=1\r\nPrefer: wait=2\r\n\r\n", "Prefer", []string{"wait=1", "wait=2"}},
		{"one Authorization", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer  a.b.c\r\n\r\n", "Authorization", []string{"Bearer  a.b.c"}},
		// A bearer of 16 KiB, as an enterprise IdP's token with many group claims is: past
		// nginx's default of 8 KiB a header line, which it would refuse with an HTML 400.
		{"a 16 KiB Authorization", "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + bigToken + "\r\n\r\n", "Authorization", []string{"Bearer " + bigToken}},
	} {
		resp := rawRequest(t, addr, tt.raw)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: the gateway answered %d itself", tt.what, resp.StatusCode)
			continue
		}
		h := <-got
		if v := h.Values(tt.name); !slices.Equal(v, tt.want) {
			t.Errorf("%s: the replica got %s %q, want %q", tt.what, tt.name, v, tt.want)
		}
	}
}

// bigToken is a JWT-shaped bearer of 16 KiB.
var bigToken = "eyJhbGciOiJSUzI1NiJ9." + strings.Repeat("a", 16<<10-64) + ".sig"

// rawRequest sends raw, a whole HTTP/1.1 request, on a connection of its own and reads the
// answer: Go's client would not send what some of these requests send.
func rawRequest(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, raw) // the gateway may answer and close before it has read it all
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestGatewayNeverRedirects: the base path without its slash goes to the service, which
// answers it as any path it has no route for, as it does directly; nginx would otherwise
// answer a 301 to `/ask/` itself, which a client follows with a GET whatever it sent.
func TestGatewayNeverRedirects(t *testing.T) {
	reached := make(chan string, 4)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Method + " " + r.URL.RequestURI()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(upstream.Close)
	base := startNginx(t, strings.TrimPrefix(upstream.URL, "http://"))
	addr := strings.TrimPrefix(base, "http://")
	for _, raw := range []string{
		"GET /ask HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /ask?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
	} {
		resp := rawRequest(t, addr, raw)
		_ = resp.Body.Close()
		want := raw[:strings.Index(raw, " HTTP/")]
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: the gateway answered %d (Location %q) itself", want, resp.StatusCode, resp.Header.Get("Location"))
			continue
		}
		if got := <-reached; got != want {
			t.Errorf("the replica got %q, want %q", got, want)
		}
	}
}

// TestGatewayDoesNotNameItsVersion: neither a proxied answer nor an answer nginx writes itself
// tells a client which nginx release, with which known flaws, stands in front of the service.
func TestGatewayDoesNotNameItsVersion(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(upstream.Close)
	addr := strings.TrimPrefix(startNginx(t, strings.TrimPrefix(upstream.URL, "http://")), "http://")
	for what, raw := range map[string]string{
		"a proxied answer":         "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n\r\n",
		"a header block too large": "GET /ask/v1/asks/t_x HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Big: "+strings.Repeat("a", 30<<10)+"\r\n", 6) + "\r\n",
	} {
		resp := rawRequest(t, addr, raw)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if s := resp.Header.Get("Server"); strings.Contains(s, "/") || strings.Contains(string(body), "nginx/") {
			t.Errorf("%s: %d, Server %q, body %q: names nginx's version", what, resp.StatusCode, s, body)
		}
	}
}
