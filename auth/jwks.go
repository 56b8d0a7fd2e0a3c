package auth

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"golang.org/x/time/rate"
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
//   - a genuine new kid arriving after a flood waits at most about one interval for the next
//     refetch, instead of minutes. unknownKIDWaitMax is one interval plus one fetch (jwkset
//     bounds the wait and the refetch with the same deadline), so at most one request is ever
//     queued for a future refetch: one that would have to wait longer fails at once (and
//     succeeds on retry within about an interval), and a flood cannot pile up blocked requests.
//
// Independently of unknown kids, the whole set is refetched every refreshInterval, so key
// revocation is noticed and rotation is picked up even with no traffic.
const (
	unknownKIDBurst    = 5
	unknownKIDInterval = 10 * time.Second
	unknownKIDWaitMax  = unknownKIDInterval + fetchTimeout
	refreshInterval    = 5 * time.Minute
	// fetchTimeout bounds each JWKS request, including the first one made by New.
	fetchTimeout = 5 * time.Second
)

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
		Client:                    client,
		Ctx:                       ctx,
		HTTPTimeout:               fetchTimeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			log.LogAttrs(ctx, slog.LevelWarn, "auth: JWKS fetch failed", slog.String("jwks_url", u), slog.Any("error", err))
		},
		RefreshInterval: refreshInterval,
		Storage:         store,
	})
	if err != nil {
		return nil, nil, err
	}
	storage, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{u: remote},
		RateLimitWaitMax:  unknownKIDWaitMax,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(unknownKIDInterval), unknownKIDBurst),
	})
	if err != nil {
		return nil, nil, err
	}
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:     ctx,
		Storage: storage,
		// Keys marked for encryption never verify signatures; keys without `use` may.
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return nil, nil, err
	}
	return kf, store, nil
}
