package model

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/das-ask/ask/internal/egress"
)

// ErrOffOrigin is a provider redirecting a call to another origin (scheme, host, port): it is
// not followed.
var ErrOffOrigin = errors.New("redirected off its configured origin; not followed")

// MaxResponseHeaderBytes bounds the header of one HTTP response from a model provider, with
// the default client, as a source's is (egress.MaxResponseHeaderBytes).
const MaxResponseHeaderBytes = egress.MaxResponseHeaderBytes

// MaxResponseBytes bounds the body of one HTTP response from a model provider: a reply at the
// output token cap (ASK_LLM_MAX_TOKENS) is some hundreds of KiB at most, tool calls and all. A
// provider, or a gateway or local server at ASK_LLM_BASE_URL, sending more fails the call in
// transport (ErrResponseTooLarge) instead of being read whole into memory and, as the
// answer's text, into the run's events and the conversation every later turn resends.
const MaxResponseBytes = 8 << 20

// ErrResponseTooLarge is a provider's response body longer than MaxResponseBytes.
var ErrResponseTooLarge = errors.New("response larger than the limit")

// SameOriginClient is hc (nil: a client like http.DefaultClient whose response headers are
// bounded by MaxResponseHeaderBytes) refusing to follow a redirect off the origin of the
// request it started from, and reading at most MaxResponseBytes of a response's body. A 307 or 308 re-sends the whole call — the conversation and the
// question in it, and any key header but Authorization, which Go's client strips across hosts
// while it forwards Anthropic's x-api-key — so a provider, or a gateway at its base URL, may
// move a call within its origin and nowhere else.
func SameOriginClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = &http.Client{Transport: egress.Proxied()}
	}
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = boundedBody{base}
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && origin(req) != origin(via[0]) {
			return ErrOffOrigin
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 { // http.Client's own default
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

func origin(r *http.Request) string {
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(r.URL.Scheme)]
	}
	return strings.ToLower(r.URL.Scheme) + "://" + strings.ToLower(r.URL.Hostname()) + ":" + port
}

// boundedBody is a transport whose responses' bodies fail a read past MaxResponseBytes.
type boundedBody struct{ base http.RoundTripper }

func (b boundedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{rc: resp.Body, left: MaxResponseBytes}
	}
	return resp, err
}

// limitedBody fails a read once more than left bytes have come.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, ErrResponseTooLarge
	}
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }
