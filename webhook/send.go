package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Result is what one attempt got.
type Result struct {
	// Status is the HTTP status, 0 when no response came.
	Status int
	// Err names why no response came (timeout, connect, refused_address, …); "" with a status.
	Err string
	// RetryAfter is the receiver's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Elapsed is the attempt's duration.
	Elapsed time.Duration
}

// Outcome classes of an attempt, used as metric labels and in the delivery's state.
const (
	outDelivered = "delivered" // 2xx
	outRetry     = "retry"     // any other status (a 4xx but 410 included), no response
	outRejected  = "rejected"  // 410, a redirect, or an address the policy refuses
)

// classify says what a result means for the delivery.
func classify(r Result) string {
	switch {
	case r.Status >= 200 && r.Status < 300:
		return outDelivered
	case r.Err == "refused_address":
		return outRejected // the operator's policy, not a passing fault
	case r.Status == http.StatusGone:
		return outRejected // the receiver wants no more (Standard Webhooks: stop sending)
	case r.Status >= 300 && r.Status < 400:
		// Never followed, and the URL is the ask's: another attempt would be answered the same.
		return outRejected
	}
	// Standard Webhooks counts every other answer as a failure to retry, a 404 or a 401
	// included: a receiver mid-deploy or mid-rotation of its secret gets the end later.
	return outRetry
}

// sender makes single attempts.
type sender struct {
	// client sends to https URLs; plain to http ones, connecting only to loopback addresses.
	client  *http.Client
	plain   *http.Client
	signers []*standardwebhooks.Webhook
	// endpoint are the signers of the prefixes with secrets of their own (EndpointSecrets).
	endpoint map[string][]*standardwebhooks.Webhook
	cfg      Config
	timeout  time.Duration
	now      func() time.Time
}

// newSender builds the HTTP clients the policy demands: the dialer checks every resolved address
// (plain http's only a loopback one), no proxy, no redirects, no cookies, bounded time.
// transport, when not nil, replaces the network of both (tests); the redirect and header rules
// still apply.
func newSender(c Config, transport http.RoundTripper) (*sender, error) {
	s := &sender{timeout: c.Timeout, now: time.Now, cfg: c, endpoint: map[string][]*standardwebhooks.Webhook{}}
	signers := func(secrets []string) ([]*standardwebhooks.Webhook, error) {
		var ws []*standardwebhooks.Webhook
		for _, sec := range secrets {
			w, err := newSigner(sec)
			if err != nil {
				return nil, err
			}
			ws = append(ws, w)
		}
		return ws, nil
	}
	var err error
	if s.signers, err = signers(c.Secrets); err != nil {
		return nil, err
	}
	for p, secrets := range c.EndpointSecrets {
		if s.endpoint[p], err = signers(secrets); err != nil {
			return nil, err
		}
	}
	plain := transport
	if transport == nil {
		transport, plain = c.transport(c.control), c.transport(c.controlPlain)
	}
	s.client, s.plain = c.client(transport), c.client(plain)
	return s, nil
}

// transport is the network as the policy allows it: control checks every resolved address.
func (c Config) transport(control func(string, string, syscall.RawConn) error) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           c.dialer(&net.Dialer{Timeout: c.Timeout}, control),
		TLSHandshakeTimeout:   c.Timeout,
		ResponseHeaderTimeout: c.Timeout,
		// A receiver's answer is a status: its headers are bounded as its body is
		// (maxResponseBytes), not by the transport's 10 MB default per attempt.
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
}

// dialer is base's DialContext with control checking every resolved address. A name may
// resolve to addresses the policy refuses beside ones it allows; Go's dialer tries each in turn
// and, when none connects, reports the first one's error. When that is a refusal but an allowed
// address was tried and did not answer, the attempt failed to connect (a passing fault, retried),
// not by the operator's policy (final): the refusal is reported only when every address tried
// was refused.
func (c Config) dialer(base *net.Dialer, control func(string, string, syscall.RawConn) error) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var passed atomic.Bool // Control runs concurrently for the two families (Happy Eyeballs)
		d := *base
		d.Control = func(network, address string, raw syscall.RawConn) error {
			if err := control(network, address, raw); err != nil {
				return err
			}
			passed.Store(true)
			return nil
		}
		conn, err := d.DialContext(ctx, network, address)
		if err != nil && passed.Load() && errors.Is(err, errRefusedAddr) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &net.OpError{Op: "dial", Net: network, Err: errAllowedUnreachable}
		}
		return conn, err
	}
}

// errAllowedUnreachable replaces a refusal reported for a name whose allowed address was tried
// and did not answer.
var errAllowedUnreachable = errors.New("no allowed address of the name answered (others it resolves to are refused)")

func (c Config) client(t http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: t,
		// A redirect is an answer, never followed: following it could reach a destination the
		// operator never allowed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       c.Timeout,
	}
}

// closeIdle closes the connections the clients keep alive between attempts. An attempt in
// flight keeps its own; the caller makes none after it (Run's end).
func (s *sender) closeIdle() {
	s.client.CloseIdleConnections()
	s.plain.CloseIdleConnections()
}

// signersFor are the signers of a delivery to rawURL: its prefix's own, or the shared ones.
func (s *sender) signersFor(rawURL string) []*standardwebhooks.Webhook {
	if len(s.endpoint) > 0 {
		if u, err := url.Parse(rawURL); err == nil {
			if p, ok := s.cfg.prefixOf(u); ok && len(s.endpoint[p]) > 0 {
				return s.endpoint[p]
			}
		}
	}
	return s.signers
}

// signingSecrets counts the secrets that sign: the shared ones and the prefixes' own.
func (s *sender) signingSecrets() int {
	n := len(s.signers)
	for _, ws := range s.endpoint {
		n += len(ws)
	}
	return n
}

// sign returns the webhook-signature header for one attempt to rawURL: one v1 signature per
// secret of its prefix, or per shared secret.
func (s *sender) sign(rawURL, id string, ts time.Time, body []byte) (string, error) {
	signers := s.signersFor(rawURL)
	if len(signers) == 0 {
		// Validate makes this unreachable for an allowed URL; an unsigned delivery must never go.
		return "", errors.New("no secret signs deliveries to this URL")
	}
	sigs := make([]string, 0, len(signers))
	for _, w := range signers {
		sig, err := w.Sign(id, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// send makes one signed POST of body to url.
func (s *sender) send(ctx context.Context, url, id string, body []byte) Result {
	start := s.now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sig, err := s.sign(url, id, start, body)
	if err != nil {
		return Result{Err: "sign"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Err: "request"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ask-webhooks/1")
	setExact(req.Header, standardwebhooks.HeaderWebhookID, id)
	setExact(req.Header, standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(start.Unix(), 10))
	setExact(req.Header, standardwebhooks.HeaderWebhookSignature, sig)
	client := s.client
	if req.URL.Scheme != "https" {
		client = s.plain
	}
	resp, err := client.Do(req)
	elapsed := s.now().Sub(start)
	if err != nil {
		return Result{Err: errKind(err), Elapsed: elapsed}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
	_ = resp.Body.Close()
	r := Result{Status: resp.StatusCode, Elapsed: elapsed}
	if classify(r) == outRetry { // a receiver may say when to come back on any answer retried
		r.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), s.now())
	}
	return r
}

// setExact sets header k named exactly as written: the specification names the headers
// webhook-id, webhook-timestamp and webhook-signature, and a receiver reading a raw header map
// (API Gateway's REST events keep the case sent) looks them up so. Header.Set would send Go's
// canonical Webhook-Id. HTTP/2 lowercases every name anyway.
func setExact(h http.Header, k, v string) { h[k] = []string{v} }

// errKind is a short, bounded name for a transport failure: it is a metric label and appears
// on GET, so it never holds the URL.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, errRefusedAddr):
		return "refused_address"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return "connect"
	}
	if strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "x509") {
		return "tls"
	}
	return "transport"
}

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		if n > 1<<20 {
			n = 1 << 20
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
