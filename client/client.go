package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/httpurl"
	"github.com/das-ask/ask/internal/redact"
)

// Options configure a Client. Zero values mean defaults.
type Options struct {
	// Token supplies the bearer for every request. Nil sends no Authorization header.
	Token TokenSource
	// HTTPClient performs the requests. Nil means a plain *http.Client. Do not give it an overall
	// Timeout: it would cut event streams, which stay open for as long as a run lasts. A
	// redirect within the service's origin (scheme, host and port) is followed; one to another
	// origin is not, and its 3xx is the answer (an *APIError), so the bearer and a create's body
	// (the question) never leave that origin — unless an *http.Client given here has a
	// CheckRedirect of its own; another Doer follows its own policy.
	HTTPClient gen.HttpRequestDoer
	// Logger receives reconnects and other recoverable trouble. Nil discards.
	Logger *slog.Logger
	// Reconnect is the event stream's reconnect policy.
	Reconnect Reconnect
	// IdleTimeout is how long an event stream may stay completely silent (not even a keep-alive
	// comment) before the connection is taken for dead and replaced. 0 means 45 s, comfortably
	// above the service's default keep-alive of 10 s; negative disables the check. It counts
	// while the client waits to read, not while the caller holds an event.
	IdleTimeout time.Duration
	// MaxEventSize bounds one event's data in bytes. 0 means 16 MiB.
	MaxEventSize int
	// Retry is how calls other than the event stream are retried (see Retry).
	Retry Retry
	// HeaderTimeout bounds the wait for a response's headers, on every request (an event
	// stream's connection included; `Prefer: wait` adds its wait): a frozen replica or gateway
	// then costs this long and a retry, not a minute. 0 means DefaultHeaderTimeout (15 s);
	// negative disables it.
	HeaderTimeout time.Duration
}

// Reconnect is how an event stream retries a dropped or failed connection: exponential backoff
// with full jitter, never shorter than the server's SSE "retry" or Retry-After, and never longer
// than Max — whatever the server asks, a server cannot make the client wait longer than Max
// between two connections. The budget counts reconnects in a row that made no progress and is
// reset whenever the cursor advances.
type Reconnect struct {
	// Initial is the backoff before the first retry. 0 means 250 ms.
	Initial time.Duration
	// Max caps every wait between two connections: the backoff, and the server's "retry" and
	// Retry-After, which raise the wait up to Max and never beyond. 0 means 30 s.
	Max time.Duration
	// Attempts is how many reconnects in a row without progress are allowed before the stream
	// gives up with an error; the first connection is not one (unlike Retry.Attempts, which
	// counts every try). 0 means 10.
	Attempts int
}

func (r Reconnect) withDefaults() Reconnect {
	if r.Initial <= 0 {
		r.Initial = 250 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 30 * time.Second
	}
	if r.Max < r.Initial {
		r.Max = r.Initial
	}
	if r.Attempts <= 0 {
		r.Attempts = 10
	}
	return r
}

// Client talks to one ask service. It is safe for concurrent use.
type Client struct {
	// reached is set once any call had a response from the service (see Retry).
	reached atomic.Bool

	raw  *gen.Client
	base string // the base URL, any password redacted, for errors
	opts Options
	log  *slog.Logger
}

// CheckBaseURL reports whether raw can be the service's base URL, as New checks it: an absolute
// http(s) URL without a query or a fragment. A CLI calls it to say a bad URL is a usage error
// before it mints a token. The error shows any password and query value as xxxxx.
func CheckBaseURL(raw string) error {
	if _, err := httpurl.Parse(raw); err != nil {
		return fmt.Errorf("client: base URL must be an absolute http(s) URL, got %q", redact.URL(raw))
	}
	if strings.ContainsAny(raw, "?#") {
		// The service's paths are joined to the base path; a query in it made the generated
		// client resolve them against its parent (…/ask?k=1 sent /v1/conversations, the
		// gateway's prefix lost, the bearer to whatever serves the origin's root).
		return fmt.Errorf("client: base URL %q must not carry a query or a fragment: the service's paths are joined to it", redact.URL(raw))
	}
	return nil
}

// New returns a client of the service at baseURL, which includes any gateway prefix
// (for example http://127.0.0.1:8080/ask).
func New(baseURL string, opts Options) (*Client, error) {
	if err := CheckBaseURL(baseURL); err != nil {
		return nil, err
	}
	u, _ := httpurl.Parse(baseURL)
	switch hc := opts.HTTPClient.(type) {
	case nil:
		opts.HTTPClient = &http.Client{CheckRedirect: sameOrigin}
	case *http.Client:
		if hc.CheckRedirect == nil {
			own := *hc
			own.CheckRedirect = sameOrigin
			opts.HTTPClient = &own
		}
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 45 * time.Second
	}
	if opts.MaxEventSize <= 0 {
		opts.MaxEventSize = 16 << 20
	}
	opts.Reconnect = opts.Reconnect.withDefaults()
	opts.Retry = opts.Retry.withDefaults()
	if opts.HeaderTimeout == 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	var doer gen.HttpRequestDoer = traceWrites{next: opts.HTTPClient}
	if opts.HeaderTimeout > 0 {
		doer = headerTimeout{next: doer, d: opts.HeaderTimeout}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A user name and password in the URL are not sent: net/http would send them as Basic
	// credentials to a service whose credential is the bearer (and to every hop that logs its
	// Authorization), as the TypeScript and Python clients leave them out too.
	bare := *u
	bare.User = nil
	raw, err := gen.NewClient(bare.String(),
		gen.WithHTTPClient(doer),
		gen.WithRequestEditorFn(bearer(opts.Token)))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{raw: raw, base: u.Redacted(), opts: opts, log: log}, nil
}

// sameOrigin is the redirect policy of the client's *http.Client: a redirect within the
// service's origin (scheme, host and port) is followed, as net/http would; one anywhere else is
// not, and its 3xx is the answer (an APIError). net/http would follow it carrying the
// Authorization header whenever the target's host is the service's or a subdomain of it —
// another port, or http after https — and a 307 or 308 sends the body again: a createAsk's,
// the question.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("client: stopped after 10 redirects")
	}
	if originOf(req.URL) != originOf(via[0].URL) {
		return http.ErrUseLastResponse
	}
	return nil
}

// originOf is u's scheme, host and port, the port made explicit.
func originOf(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// bearer sets the Authorization header from ts on every request.
func bearer(ts TokenSource) gen.RequestEditorFn {
	return func(ctx context.Context, req *http.Request) error {
		if ts == nil {
			return nil
		}
		tok, err := ts.Token(ctx)
		if err != nil {
			return &tokenError{err: err}
		}
		if err := CheckBearer(tok); err != nil {
			return &tokenError{err: err}
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}
}

// CheckBearer refuses a token that cannot be sent as a bearer credential: empty, pasted with
// the header's scheme ("Bearer eyJ…", the commonest slip), or holding white space or a
// control character (a token read from a file with its line break, say). net/http would refuse
// the header only when the request is sent, as a transport error that reads as an unreachable
// service and is retried; this is final, and names the fault without the token. The client
// checks each token its TokenSource gives; a CLI may check one it was given before it asks.
func CheckBearer(tok string) error {
	if tok == "" {
		return errors.New("the token is empty")
	}
	if len(tok) > len("Bearer ") && strings.EqualFold(tok[:len("Bearer ")], "Bearer ") {
		return errors.New(`the token starts with "Bearer ": give the token alone (the scheme is sent with it)`)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("the token holds white space or a control character at byte %d: not a bearer token", i)
		}
	}
	return nil
}

// tokenError is a failure of the caller's TokenSource: final for a stream, since retrying the
// connection cannot repair it.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return "client: token source: " + e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }
