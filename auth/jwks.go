package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"golang.org/x/time/rate"

	"github.com/das-ask/ask/internal/redact"
)

// Refreshing the JWKS when a token names a `kid` we do not hold.
//
// A real key rotation shows up as a token whose kid is not in our cached JWKS, so an unknown kid
// must trigger a refetch. But anyone can send a token with a garbage kid, so refetches are rate
// limited. jwkset's default (one refetch per 5 minutes, no burst, waiting up to a minute) lets a
// single garbage kid spend the only token and lock a genuine rotation out for five minutes.
//
// We allow a burst of unknownKIDBurst refetches, then one every unknownKIDInterval:
//   - a handful of garbage kids (or a few concurrent first requests after a rotation) cost
//     nothing: each still gets an immediate refetch;
//   - a sustained flood costs the IdP at most one JWKS fetch per unknownKIDInterval per
//     replica, which any JWKS endpoint serves without noticing;
//   - a token whose kid is unknown when no refetch is allowed is refused at once: nothing
//     waits for the limiter. (Waiting — jwkset's way, up to its RateLimitWaitMax — held every
//     forged request, its connection and its goroutine, for about an interval: an amplifier
//     for connection exhaustion, found by review: twelve sequential probes took 5.9 s, then
//     about 10 s each.)
//   - rotation is not weakened: every refetch, whoever's request caused it, and the periodic
//     refresh, fetch the whole set, so a genuine new kid is accepted after the next one — at
//     once while the burst lasts, within about one interval after a flood (its first requests
//     may be refused and succeed on retry).
//
// Independently of unknown kids, the whole set is refetched every refreshInterval, so key
// revocation is noticed and rotation is picked up even with no traffic.
const (
	unknownKIDBurst    = 5
	unknownKIDInterval = 10 * time.Second
	refreshInterval    = 5 * time.Minute
	// Until a first fetch succeeds, it is retried from firstRetry, doubling, to lastRetry apart.
	firstRetry = time.Second
	lastRetry  = 30 * time.Second
	// fetchTimeout bounds each JWKS request, including the first one made by New.
	fetchTimeout = 5 * time.Second
	// maxJWKSBytes bounds each JWKS response body. jwkset decodes the whole body into memory,
	// so without it a huge or endless response (a misconfigured DAS_JWKS_URL, a broken or
	// hostile IdP) took memory without limit until fetchTimeout. A real JWKS is a few KiB
	// (a large tenant's, with certificate chains, some tens of KiB); a fetch past the bound
	// fails like any other, and the keys already held are kept.
	maxJWKSBytes = 1 << 20
)

// errJWKSTooLarge is a JWKS response body longer than maxJWKSBytes.
var errJWKSTooLarge = fmt.Errorf("JWKS response exceeds %d bytes", maxJWKSBytes)

// errNotJWKSet is a successful JWKS response that is not a JWK Set.
var errNotJWKSet = errors.New(`JWKS response is not a JWK Set: want an object whose "keys" is an array`)

// boundedClient returns a copy of c that follows no redirect from https to plain http
// (errJWKSDowngrade), whose response bodies fail once they pass maxJWKSBytes,
// and whose 200 responses fail unless they hold a JWK Set (RFC 7517 §5: an object with a
// "keys" array). jwkset read `{}`, `null` or `{"keys":null}` as an empty set and dropped
// every key it held; a fetch that fails keeps them. `{"keys":[]}` still withdraws every key.
func boundedClient(c *http.Client) *http.Client {
	bc := *c
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	bc.Transport = boundedTransport{rt}
	next := c.CheckRedirect
	bc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme != "https" {
			return errJWKSDowngrade
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 { // http.Client's own default policy
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &bc
}

// errJWKSDowngrade is a redirect from an https JWKS URL to plain http. It is not followed: the
// keys would cross the network readable and, worse, writable by whoever is on the path (or by
// a forward proxy from the environment), who could publish a key of its own and mint any
// identity. The fetch fails like any other; the keys already held are kept.
var errJWKSDowngrade = errors.New("JWKS redirected from https to plain http; not followed")

type boundedTransport struct{ rt http.RoundTripper }

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	body := http.MaxBytesReader(nil, resp.Body, maxJWKSBytes)
	if resp.StatusCode != http.StatusOK {
		resp.Body = body // jwkset refuses the status
		return resp, nil
	}
	b, err := io.ReadAll(body)
	_ = body.Close()
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		return nil, errJWKSTooLarge
	}
	if err != nil {
		return nil, err
	}
	var set struct {
		Keys json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) == 0 || set.Keys[0] != '[' {
		return nil, errNotJWKSet
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// unknownKIDGate is the key storage the keyfunc reads. A kid in the cache is answered from it;
// an unknown kid is passed to the refetching client only when the limiter has a refetch to give
// right now (Allow, never Wait), and refused at once otherwise.
type unknownKIDGate struct {
	jwkset.Storage // the refetching client: cache, then one refetch on a miss
	cache          jwkset.Storage
	limiter        *rate.Limiter
}

// errNoRefreshDue marks an unknown kid refused without a refetch.
var errNoRefreshDue = errors.New("no JWKS refetch is due")

func (g *unknownKIDGate) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	jwk, err := g.cache.KeyRead(ctx, kid)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		if !g.limiter.Allow() {
			return jwkset.JWK{}, fmt.Errorf("%w %q: %w", jwkset.ErrKeyNotFound, kid, errNoRefreshDue)
		}
		jwk, err = g.Storage.KeyRead(ctx, kid)
	}
	if err != nil {
		return jwk, err
	}
	if !forVerifying(jwk.Marshal()) {
		return jwkset.JWK{}, errNotForVerifying
	}
	return jwk, nil
}

// errNotForVerifying is a key the JWKS publishes for another purpose than checking signatures.
var errNotForVerifying = errors.New("JWK is not published for verifying signatures")

// forVerifying reports whether a JWK may verify a signature. RFC 7517 marks a key's purpose
// two ways: `use` (§4.2), where "enc" is an encryption key, and `key_ops` (§4.3), where the
// operation a signature check needs is "verify". A key with neither may verify (most IdPs
// mark none); a key whose `use` is not "sig", or whose `key_ops` lack "verify", may not.
// keyfunc's UseWhitelist looks at `use` alone, so a key marked `key_ops: ["encrypt"]`
// verified tokens as if it were unmarked.
func forVerifying(m jwkset.JWKMarshal) bool {
	if m.USE != "" && m.USE != jwkset.UseSig {
		return false
	}
	return len(m.KEYOPS) == 0 || slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify)
}

// readyStore is the storage behind the HTTP JWKS: jwkset replaces its whole content after each
// successful fetch and decode, and only then, so a KeyReplaceAll call means "a fetch succeeded".
type readyStore struct {
	jwkset.Storage
	ready atomic.Bool
}

func (s *readyStore) KeyReplaceAll(ctx context.Context, keys []jwkset.JWK) error {
	err := s.Storage.KeyReplaceAll(ctx, keys)
	if err == nil {
		s.ready.Store(true)
	}
	return err
}

// newKeySet builds the keyfunc over the JWKS at u. A failed first fetch is logged, not returned:
// a service must be able to start before its identity provider. The background refresh ends
// when ctx is done.
func newKeySet(ctx context.Context, u string, client *http.Client, log *slog.Logger) (keyfunc.Keyfunc, *readyStore, error) {
	store := &readyStore{Storage: jwkset.NewMemoryStorage()}
	remote, err := jwkset.NewStorageFromHTTP(u, jwkset.HTTPClientStorageOptions{
		Client:                    boundedClient(client),
		Ctx:                       ctx,
		HTTPTimeout:               fetchTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			// The fetch's error quotes the URL as sent, its query's values in clear.
			log.LogAttrs(ctx, slog.LevelWarn, "auth: JWKS fetch failed", slog.String("jwks_url", redact.URL(u)), slog.String("error", redact.In(err.Error(), u)))
		},
		RefreshInterval: refreshInterval,
		Storage:         store,
	})
	if err != nil {
		return nil, nil, err
	}
	// The gate rations refetches; the client's own limiter never makes anyone wait, and its
	// RateLimitWaitMax bounds the refetch itself.
	refetching, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{u: remote},
		RateLimitWaitMax:  fetchTimeout,
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	})
	if err != nil {
		return nil, nil, err
	}
	gate := &unknownKIDGate{
		Storage: refetching, cache: remote,
		limiter: rate.NewLimiter(rate.Every(unknownKIDInterval), unknownKIDBurst),
	}
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:     ctx,
		Storage: gate,
		// Keys marked for encryption never verify signatures; keys without `use` may. The
		// gate also refuses a key whose `key_ops` lack "verify" (forVerifying).
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return nil, nil, err
	}
	if !store.ready.Load() {
		go fetchUntilReady(ctx, refetching, store)
	}
	return kf, store, nil
}

// fetchUntilReady fetches the JWKS again, with a backoff, until a fetch succeeds or ctx is
// done. A validator without keys refuses every token, so the readiness probe says
// jwks_not_loaded; a load balancer that follows it sends no request whose kid would make it
// fetch, and the periodic refresh comes only every refreshInterval: without these retries a
// replica that started before its IdP stayed unready for minutes after the IdP came up.
// Each failure is logged by the storage's error handler, at most once per lastRetry once the
// backoff is spent.
func fetchUntilReady(ctx context.Context, refetching jwkset.Storage, store *readyStore) {
	wait := firstRetry
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if store.ready.Load() {
			return // a request's refetch, or the periodic refresh, got there first
		}
		// A kid no key has: the refetching client fetches the whole set, then finds nothing.
		_, _ = refetching.KeyRead(ctx, "")
		if store.ready.Load() {
			return
		}
		wait = min(2*wait, lastRetry)
		t.Reset(wait)
	}
}
