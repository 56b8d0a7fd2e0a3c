// Package egress is the transport the service calls out on where nothing more particular is
// configured: http.DefaultTransport's settings, each connection pool shared by its users, with
// two bounds net/http does not keep. A response's header is read to at most
// MaxResponseHeaderBytes (net/http alone holds up to 10 MiB of header lines in memory), and,
// on Guarded, plain http never goes through the environment's proxy. LimitBody bounds a
// response's body, for the callers that know how much they expect (a source's session, a
// model provider's client).
package egress

import (
	"net/http"
	"net/url"
	"sync"
)

// MaxResponseHeaderBytes bounds the header of one HTTP response the service reads: a longer
// one fails the request as a transport failure. A source, an identity provider or a model
// provider sends a few hundred bytes; a gateway's cookies and security headers a few KiB.
const MaxResponseHeaderBytes = 64 << 10

// Guarded is the transport of requests whose plain-http form a forward proxy must not see:
// a source's (the caller's bearer goes with it, to the configured origin and nowhere else)
// and a JWKS fetch's (a proxy answering it could publish a key of its own and mint any
// identity). A proxy from the environment (HTTP_PROXY, set for the model provider's egress,
// say) would read and could rewrite such a request whole, so only https requests use it,
// inside a CONNECT tunnel it cannot read; plain http is always direct.
var Guarded = sync.OnceValue(func() http.RoundTripper {
	t := bounded()
	t.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Scheme != "https" {
			return nil, nil
		}
		return http.ProxyFromEnvironment(r)
	}
	return t
})

// Proxied is the transport of a model provider's calls, which carry the service's key, not a
// caller's bearer: the environment's proxy is taken as http.DefaultTransport takes it (a
// provider is reached through HTTPS_PROXY where one is set).
var Proxied = sync.OnceValue(func() http.RoundTripper { return bounded() })

func bounded() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	return t
}
