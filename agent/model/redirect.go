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

// SameOriginClient is hc (nil: a client like http.DefaultClient whose response headers are
// bounded by MaxResponseHeaderBytes) refusing to follow a redirect off the origin of the
// request it started from. A 307 or 308 re-sends the whole call — the conversation and the
// question in it, and any key header but Authorization, which Go's client strips across hosts
// while it forwards Anthropic's x-api-key — so a provider, or a gateway at its base URL, may
// move a call within its origin and nowhere else.
func SameOriginClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = &http.Client{Transport: egress.Proxied()}
	}
	c := *hc
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
