package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// These tests serve the whole handler chain (Server.Handler) with net/http over a socket, as a
// deployment does: what they check (redirects, HEAD, Allow) is decided by net/http and the
// router as much as by the service, and an in-memory transport would not show it.

// wire serves h's service on a loopback socket for the test's duration.
func wire(t *testing.T, h *harness) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h.srv.Handler())
	t.Cleanup(ts.Close) // before the harness's Shutdown: cleanups run last first
	return ts
}

// noRedirect is a client that reports a redirect instead of following it.
func noRedirect() *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// send sends method target (a path, sent as written) with tok as the bearer ("" for none).
func send(t *testing.T, ts *httptest.Server, method, target, tok, body string, hdr ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// rawResponse is a response read off the socket, with whatever the server sent after it.
type rawResponse struct {
	*http.Response
	after []byte // bytes after the response's own (a HEAD's must be none)
}

// onConn sends one request on its own connection (closed after the response) and reads the
// response as a response to method, then everything the server sent after it.
func onConn(t *testing.T, ts *httptest.Server, method, target, tok string, hdr ...string) rawResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", ts.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: ask.test\r\nConnection: close\r\n")
	if tok != "" {
		b.WriteString("Authorization: Bearer " + tok + "\r\n")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		b.WriteString(hdr[i] + ": " + hdr[i+1] + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	after, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("%s %s: reading after the response: %v", method, target, err)
	}
	return rawResponse{resp, append(body, after...)}
}

// TestUncleanPathsAre404: a path with an empty or dot segment is 404 problem+json, before
// authentication, and never a redirect to the cleaned path (a different resource, which a
// client following a 307 would POST to); the paths the service hands out are unaffected.
func TestUncleanPathsAre404(t *testing.T) {
	h := newHarness(t, server.Options{})
	ts := wire(t, h)
	cid := h.conv(alice)
	ticket := h.ask(alice, cid, "a question")
	h.events(alice, ticket) // the run has ended

	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/ask/v1/asks//events", ""},
		{http.MethodPost, "/ask/v1/conversations//asks", `{"question":"q"}`},
		{http.MethodPost, "/ask/v1/conversations/" + cid + "//asks", `{"question":"q"}`},
		{http.MethodGet, "/ask//v1/asks/" + ticket, ""},
		{http.MethodGet, "/ask/v1/asks/t_X/../" + ticket, ""},
		{http.MethodGet, "/ask/v1/asks/" + ticket + "/./events", ""},
		{http.MethodGet, "/ask/v1/asks/%2e%2e/asks/" + ticket, ""},
		{http.MethodGet, "/ask/./v1/openapi.yaml", ""},
		{http.MethodGet, "/ask/v1/asks/" + ticket + "/", ""},
		{http.MethodGet, "/ask/v1/asks/", ""},
		{http.MethodPost, "/ask/v1/asks//cancel", ""},
		{http.MethodHead, "/ask/v1/asks//events", ""},
	} {
		for _, tok := range []string{alice, ""} {
			resp := send(t, ts, tc.method, tc.path, tok, tc.body)
			body := readBody(t, resp)
			if loc := resp.Header.Get("Location"); loc != "" {
				t.Errorf("%s %s: Location %q: redirected", tc.method, tc.path, loc)
			}
			if tc.method == http.MethodHead {
				if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
					t.Errorf("HEAD %s: %d %q, want 404 problem+json", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				continue
			}
			p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusNotFound)
			if p.Detail == nil || *p.Detail != "no such resource" {
				t.Errorf("%s %s: detail %v, want the unknown resource's", tc.method, tc.path, p.Detail)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Errorf("%s %s: no X-Request-Id", tc.method, tc.path)
			}
		}
	}

	// The same calls on clean paths do what they do.
	if resp := send(t, ts, http.MethodGet, "/ask/v1/asks/"+ticket, alice, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("status: %d", resp.StatusCode)
	}
	if resp := send(t, ts, http.MethodGet, "/ask/v1/asks/"+ticket+"/events", alice, ""); resp.StatusCode != http.StatusOK ||
		resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp := send(t, ts, http.MethodGet, "/ask/v1/openapi.yaml", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("openapi.yaml: %d", resp.StatusCode)
	}
	if resp := send(t, ts, http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", alice, `{"question":"again"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("ask: %d", resp.StatusCode)
	}
	h.secret("again")
}

// TestHead: HEAD on every GET route answers what the GET would (status, header fields, the
// length of its content) with no content, after the same authentication, ownership and
// validation; on the event stream it returns at once, opening nothing. 405s list HEAD where
// they list GET.
func TestHead(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	h := newHarness(t, server.Options{Runner: gatedRunner(2, 0, gate)})
	ts := wire(t, h)
	cid := h.conv(alice)
	running := h.ask(alice, cid, "still running")
	status := "/ask/v1/asks/" + running
	events := status + "/events"

	// Each GET route, and its HEAD, compared. The stream is running and stays so: a HEAD that
	// waited on it would time out.
	for _, tc := range []struct {
		path, tok string
		hdr       []string
		want      int
	}{
		{"/ask/v1/openapi.yaml", "", nil, http.StatusOK},
		{"/ask/v1/openapi.json", "", nil, http.StatusOK},
		{status, alice, nil, http.StatusOK},
		{events, alice, nil, http.StatusOK},
		{events, alice, []string{"Last-Event-ID", "1"}, http.StatusOK},
		{events + "?after=2", alice, nil, http.StatusOK},
		{status, "", nil, http.StatusUnauthorized},
		{events, "", nil, http.StatusUnauthorized},
		{status, bob, nil, http.StatusNotFound},
		{events, bob, nil, http.StatusNotFound},
		{"/ask/v1/asks/t_DOESNOTEXIST/events", alice, nil, http.StatusNotFound},
		{events, alice, []string{"Last-Event-ID", "x"}, http.StatusBadRequest},
		{events, alice, []string{"Last-Event-ID", "99"}, http.StatusBadRequest},
		{"/ask/v1/asks/bad.ticket", alice, nil, http.StatusBadRequest},
		{"/ask/v1/nowhere", alice, nil, http.StatusNotFound},
	} {
		name := tc.path + " " + strings.Join(tc.hdr, ": ")
		// A HEAD that opened the stream would never end: onConn's read deadline fails it.
		head := onConn(t, ts, http.MethodHead, tc.path, tc.tok, tc.hdr...)
		if head.StatusCode != tc.want {
			t.Errorf("HEAD %s: %d, want %d", name, head.StatusCode, tc.want)
		}
		if len(head.after) > 0 {
			t.Errorf("HEAD %s: %d bytes of content sent: %.80q", name, len(head.after), head.after)
		}

		var get *http.Response
		var body []byte
		if strings.HasSuffix(strings.SplitN(tc.path, "?", 2)[0], "/events") && tc.want == http.StatusOK {
			ctx, cancel := context.WithCancel(t.Context())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+tc.tok)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			get = resp
			cancel() // the headers are what is compared; the stream is not read
			_ = resp.Body.Close()
		} else {
			get = send(t, ts, http.MethodGet, tc.path, tc.tok, "", tc.hdr...)
			body = readBody(t, get)
		}
		if get.StatusCode != head.StatusCode {
			t.Errorf("%s: GET %d, HEAD %d", name, get.StatusCode, head.StatusCode)
		}
		for _, k := range []string{"Content-Type", "Cache-Control", "X-Accel-Buffering", "WWW-Authenticate", "Allow"} {
			if g, hd := get.Header.Get(k), head.Header.Get(k); g != hd {
				t.Errorf("%s: %s: GET %q, HEAD %q", name, k, g, hd)
			}
		}
		if body != nil {
			if got, want := head.ContentLength, int64(len(body)); got != want {
				t.Errorf("%s: HEAD Content-Length %d, want the GET's %d bytes", name, got, want)
			}
			// The GET declares its length too (the contract, 50 KB, was sent chunked).
			if got, want := get.ContentLength, int64(len(body)); got != want || len(get.TransferEncoding) > 0 {
				t.Errorf("%s: GET Content-Length %d (Transfer-Encoding %q), want %d", name, got, get.TransferEncoding, want)
			}
		} else if head.Header.Get("Content-Length") != "" {
			t.Errorf("%s: a stream's HEAD says Content-Length %s", name, head.Header.Get("Content-Length"))
		}
	}

	// The HEADs opened nothing and changed nothing: the run is as it was.
	if st := h.status(alice, running).JSON200; st == nil || st.State != gen.AskStateRunning {
		t.Errorf("after the HEADs: %+v", st)
	}

	// 405: Allow lists HEAD wherever it lists GET, and not where there is no GET.
	for _, tc := range []struct {
		method, path string
		head         bool
	}{
		{http.MethodPost, "/ask/v1/openapi.yaml", true},
		{http.MethodDelete, status, true},
		{http.MethodPut, events, true},
		{http.MethodGet, status + "/cancel", false},
		{http.MethodHead, status + "/cancel", false},
		{http.MethodHead, "/ask/v1/conversations", false},
	} {
		resp := onConn(t, ts, tc.method, tc.path, alice)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 405", tc.method, tc.path, resp.StatusCode)
			continue
		}
		allow := strings.Split(resp.Header.Get("Allow"), ", ")
		hasGet, hasHead := slices.Contains(allow, http.MethodGet), slices.Contains(allow, http.MethodHead)
		if hasHead != tc.head || hasGet != tc.head {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, resp.Header.Get("Allow"))
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s %s: %q, want problem+json", tc.method, tc.path, resp.Header.Get("Content-Type"))
		}
	}
}
