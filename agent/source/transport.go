package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/das-ask/ask/internal/egress"
)

// HeaderCallID is the HTTP header that carries a tool call's id to the source.
const HeaderCallID = "Ask-Call-Id"

// DefaultMaxResponseBytes bounds one HTTP response from a source when
// Options.MaxResponseBytes is zero: far above any result a person reads, far below what
// would let one source exhaust the service's memory.
const DefaultMaxResponseBytes = 4 << 20

// maxSameOriginRedirects is how many redirects within the source's own origin one request
// may follow (a source moved behind a path, a trailing slash); beyond it the request fails.
const maxSameOriginRedirects = 3

type callIDKey struct{}

// withCallID returns ctx carrying a tool call's id, which the transport sends as HeaderCallID.
func withCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// StatusError is a source answering an MCP request with HTTP 401 or 403: the caller's
// credentials were rejected. It ends the run as a transport failure.
type StatusError struct {
	Source string
	Status int
	// Expired is the token's expiry when the status is 401 and the token had expired by
	// then, else zero.
	Expired time.Time
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("source %s rejected the credentials (HTTP %d)", e.Source, e.Status)
}

// Reasons a session's transport refused to go on, kept by the session so that the run's error
// names them (the MCP SDK flattens the errors of its HTTP exchanges into strings).
var (
	// ErrOffOrigin: a request (a redirect, or any URL) left the configured source's origin.
	// It is never sent: the caller's bearer goes to the configured origin and nowhere else.
	ErrOffOrigin = errors.New("redirected off its configured origin; not followed")
	// ErrTooManyRedirects: more than a few redirects within the source's own origin.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrResponseTooLarge: one HTTP response was larger than the session's limit.
	ErrResponseTooLarge = egress.ErrResponseTooLarge
	// ErrTooManyRequests: the source answered 429, as the demo source answers an identity
	// holding as many open sessions as it may.
	ErrTooManyRequests = errors.New("too many requests (HTTP 429)")
)

// origin is a URL's scheme, host and port, lower-cased and with the default port made
// explicit, so that http://Src:80 and http://src are the same origin and https://src is not.
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o
}

func (o origin) String() string { return o.scheme + "://" + net.JoinHostPort(o.host, o.port) }

// bearer is the http.RoundTripper of one run's session with one source. The bearer goes to
// the configured source's exact origin (scheme, host, port) and nowhere else: a request for
// any other origin is refused before anything is sent — whatever produced its URL (a
// redirect, the SDK, a server's answer) — so the guarantee does not depend on the http.Client's
// redirect policy (which strips Authorization on a cross-host hop only when the header was set
// on the original request, never when a RoundTripper adds it). It also puts the call id (from
// the request's context) on the requests of a tool call and the W3C trace context (traceparent)
// when there is a span; turns 401/403 into a *StatusError; and bounds each response body.
type bearer struct {
	base     http.RoundTripper
	source   string
	token    string
	expires  time.Time // the token's exp; zero when unknown
	origin   origin
	maxBytes int64

	mu    sync.Mutex
	fault error // the first refusal of this transport, for the run's error message
	// handshake is Connect's context until the handshake has succeeded, then nil: once it has
	// ended, nothing more is sent (see Connect).
	handshake context.Context
}

// errHandshakeOver refuses a request of a handshake whose context has ended. It is not a
// fault: the run's error names the context's end (the tool timeout), not this.
var errHandshakeOver = errors.New("the handshake is over: nothing more is sent")

// handshakeDone marks the handshake as succeeded: the session's requests no longer depend on
// Connect's context.
func (b *bearer) handshakeDone() {
	b.mu.Lock()
	b.handshake = nil
	b.mu.Unlock()
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL) != b.origin {
		return nil, b.refuse(ErrOffOrigin)
	}
	b.mu.Lock()
	hs := b.handshake
	b.mu.Unlock()
	if hs != nil && hs.Err() != nil {
		return nil, errHandshakeOver
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if id, ok := req.Context().Value(callIDKey{}).(string); ok && id != "" {
		r.Header.Set(HeaderCallID, id)
	}
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	resp, err := b.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		resp.Body.Close()
		se := &StatusError{Source: b.source, Status: resp.StatusCode}
		if resp.StatusCode == http.StatusUnauthorized && !b.expires.IsZero() && !time.Now().Before(b.expires) {
			se.Expired = b.expires // the service's own account of the token, not the source's words
		}
		return nil, se
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		resp.Body.Close()
		return nil, b.refuse(ErrTooManyRequests)
	}
	if b.maxBytes > 0 {
		resp.Body = egress.LimitBody(resp.Body, b.maxBytes, b.refuse)
	}
	return resp, nil
}

// checkRedirect is the session's http.Client redirect policy: a redirect within the source's
// origin is followed (a few times at most); one anywhere else is not (the round tripper would
// refuse to send it anyway).
func (b *bearer) checkRedirect(req *http.Request, via []*http.Request) error {
	if originOf(req.URL) != b.origin {
		return b.refuse(ErrOffOrigin)
	}
	if len(via) > maxSameOriginRedirects {
		return b.refuse(ErrTooManyRedirects)
	}
	return nil
}

func (b *bearer) refuse(err error) error {
	b.mu.Lock()
	if b.fault == nil {
		b.fault = err
	}
	b.mu.Unlock()
	return err
}

// Fault is the first refusal the transport made (ErrOffOrigin, ErrTooManyRedirects,
// ErrResponseTooLarge, ErrTooManyRequests), or nil.
func (b *bearer) Fault() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fault
}
