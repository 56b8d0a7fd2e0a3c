package hardening_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// fault decides what a faultProxy does with one request; it returns false to pass the request
// on (possibly modified) to the target.
type fault func(w http.ResponseWriter, r *http.Request, body []byte) (handled bool)

// faultProxy is a reverse proxy in front of a source or a model that injects faults on demand.
// Requests it holds (a slow target) are released when the test ends, before the stack closes,
// so no call outlives its test.
type faultProxy struct {
	srv    *httptest.Server
	target atomic.Pointer[url.URL]
	fault  atomic.Pointer[fault]
	// release is closed when the test ends: held requests return.
	release chan struct{}
	once    sync.Once
	// toolCalls counts the MCP tools/call requests that reached the proxy.
	toolCalls atomic.Int64
}

func newFaultProxy(t testing.TB) *faultProxy {
	t.Helper()
	p := &faultProxy{release: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.target.Load())
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			p.toolCalls.Add(1)
		}
		if f := p.fault.Load(); f != nil && (*f)(w, r, body) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// setTarget points the proxy at base (scheme and host).
func (p *faultProxy) setTarget(t testing.TB, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	p.target.Store(u)
}

func (p *faultProxy) set(f fault) { p.fault.Store(&f) }

// hold blocks until the test ends (releaseAll) or the caller leaves.
func (p *faultProxy) hold(r *http.Request) {
	select {
	case <-p.release:
	case <-r.Context().Done():
	}
}

func (p *faultProxy) releaseAll() { p.once.Do(func() { close(p.release) }) }

// hangUp closes the connection without an answer: a peer that died mid-call.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("hardening: the proxy's ResponseWriter cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
}

func isToolCall(body []byte) bool { return bytes.Contains(body, []byte(`"tools/call"`)) }
