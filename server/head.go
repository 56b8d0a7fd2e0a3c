package server

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// HEAD is answered on every GET route, as RFC 9110 §9.1 asks of a general-purpose server: the
// same status and header fields as GET, without content (§9.3.2). It is generic HTTP, not part
// of the contract, so the OpenAPI document does not list it.
//
// withHead registers each GET operation for HEAD too, with the same handler and middleware,
// so a HEAD is authenticated, validated and checked for ownership exactly as the GET is (no
// bearer: 401; another identity's ticket: 404), and a 405's Allow lists HEAD wherever it lists
// GET. serveHead then keeps the content from the wire. The one handler that does not end on
// its own, the event stream, answers a HEAD after its checks with a GET's headers and returns
// (openStream).

// withHead is the router gen registers the operations on: Echo, with HEAD beside every GET.
type withHead struct{ *echo.Echo }

func (r withHead) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	r.Echo.HEAD(path, h, m...)
	return r.Echo.GET(path, h, m...)
}

// serveHead serves a HEAD request through a headWriter (edge, server.go).
func serveHead(next http.Handler, w http.ResponseWriter, r *http.Request) {
	hw := &headWriter{w: w}
	next.ServeHTTP(hw, r)
	hw.send(true)
}

// headWriter answers a HEAD: it counts what the handler writes instead of sending it, and
// holds the status back until the handler returns, so that the header can carry the
// Content-Length the GET's content would have (net/http knows it only for a short one). A flush
// sends the header at once, without a length: a stream's is not known.
type headWriter struct {
	w      http.ResponseWriter
	status int
	n      int64
	sent   bool
}

func (hw *headWriter) Header() http.Header { return hw.w.Header() }

func (hw *headWriter) WriteHeader(code int) {
	switch {
	case code >= 100 && code < 200:
		hw.w.WriteHeader(code) // informational: sent as it comes, as net/http does
	case hw.status == 0:
		hw.status = code
	}
}

func (hw *headWriter) Write(p []byte) (int, error) {
	if hw.status == 0 {
		hw.status = http.StatusOK
	}
	hw.n += int64(len(p))
	return len(p), nil
}

// FlushError sends the header (http.ResponseController finds it).
func (hw *headWriter) FlushError() error {
	hw.send(false)
	return http.NewResponseController(hw.w).Flush()
}

// Unwrap gives http.ResponseController the underlying writer (deadlines).
func (hw *headWriter) Unwrap() http.ResponseWriter { return hw.w }

// send writes the status and header once: with the counted length when the handler is done,
// wrote content and set no length of its own.
func (hw *headWriter) send(done bool) {
	if hw.sent {
		return
	}
	hw.sent = true
	if hw.status == 0 {
		hw.status = http.StatusOK
	}
	h := hw.w.Header()
	if done && hw.n > 0 && h.Get("Content-Length") == "" && h.Get("Transfer-Encoding") == "" {
		h.Set("Content-Length", strconv.FormatInt(hw.n, 10))
	}
	hw.w.WriteHeader(hw.status)
}
