package model

import (
	"errors"
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

// MaxResponseBytes is the part of the bound on one HTTP response body from a model provider
// (ResponseBound) that does not depend on the output cap: a reply is some hundreds of KiB at
// most, tool calls and all. A provider, or a gateway or local server at ASK_LLM_BASE_URL,
// sending more than ResponseBound fails the call in transport (ErrResponseTooLarge) instead of
// being read whole into memory and, as the answer's text, into the run's events and the
// conversation every later turn resends.
const MaxResponseBytes = 8 << 20

// BytesPerOutputToken is what one output token may cost a response body at most: a streamed
// reply may send every token as an event of its own (about a hundred bytes of framing each).
const BytesPerOutputToken = 256

// ResponseBound is the bound on one response body from a provider called with output cap
// maxTokens (ASK_LLM_MAX_TOKENS; 0 when the provider's own applies): MaxResponseBytes and
// BytesPerOutputToken for each token of the cap.
func ResponseBound(maxTokens int64) int64 {
	return MaxResponseBytes + max(maxTokens, 0)*BytesPerOutputToken
}

// ErrResponseTooLarge is a provider's response body longer than MaxResponseBytes.
var ErrResponseTooLarge = egress.ErrResponseTooLarge

// SameOriginClient is hc (nil: a client like http.DefaultClient whose response headers are
// bounded by MaxResponseHeaderBytes) refusing to follow a redirect off the origin of the
// request it started from, and reading at most maxBody bytes of a response's body
// (ResponseBound; 0 or less: MaxResponseBytes). A 307 or 308 re-sends the whole call — the
// conversation and the question in it, and any key header but Authorization, which Go's client
// strips across hosts while it forwards Anthropic's x-api-key — so a provider, or a gateway at
// its base URL, may move a call within its origin and nowhere else.
func SameOriginClient(hc *http.Client, maxBody int64) *http.Client {
	if hc == nil {
		hc = &http.Client{Transport: egress.Proxied()}
	}
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if maxBody <= 0 {
		maxBody = MaxResponseBytes
	}
	c.Transport = boundedBody{base, maxBody}
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

// boundedBody is a transport whose responses' bodies fail a read past max bytes.
type boundedBody struct {
	base http.RoundTripper
	max  int64
}

func (b boundedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err == nil {
		resp.Body = egress.LimitBody(resp.Body, b.max, nil)
	}
	return resp, err
}
