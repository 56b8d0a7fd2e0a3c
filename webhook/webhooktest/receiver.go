// Package webhooktest is a real webhook receiver for tests and conformance: an HTTP server on a
// loopback port that verifies every delivery's Standard Webhooks signature with the secrets it
// is given (twice: with the standard-webhooks Go library, and with ReferenceVerify, a port of its
// Python and JavaScript receivers independent of the library the service signs with), records
// what came, and answers as scripted (fail N times, redirect, …).
package webhooktest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/das-ask/ask/gen"
)

// Delivery is one request the receiver got.
type Delivery struct {
	ID        string
	Timestamp string
	Signature string
	// Verified reports that the signature verified with one of the receiver's secrets, by both
	// the Go library and ReferenceVerify, and the timestamp is within their tolerance (5
	// minutes).
	Verified bool
	// VerifyError is why not.
	VerifyError string
	// Authorization is the Authorization header, which must never be set.
	Authorization string
	// Header is every header as it came, for a check that no credential rides in another.
	Header http.Header
	Method string
	Path   string
	Body   []byte
	// Status is what the receiver answered.
	Status int
	At     time.Time
}

// Decode parses the body as the contract's WebhookDelivery.
func (d Delivery) Decode() (gen.WebhookDelivery, error) {
	var w gen.WebhookDelivery
	err := json.Unmarshal(d.Body, &w)
	return w, err
}

// Answer is how the receiver answers one request: a status and headers.
type Answer struct {
	Status int
	Header http.Header
	// Wait, when not nil, runs before the answer is written, with the request's context (which
	// ends when the sender goes away): a receiver that is slow, or a sender killed mid-request.
	Wait func(ctx context.Context)
}

// Receiver is a verifying webhook receiver. Its methods are safe for concurrent use.
type Receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	secrets []*standardwebhooks.Webhook
	raw     []string // secrets as given, for ReferenceVerify
	script  func(n int, d Delivery) Answer
	got     []Delivery
	arrived chan struct{} // closed and replaced on every delivery
}

// New starts a receiver on 127.0.0.1:0 verifying with secrets (whsec_…). By default it
// answers 204 to every request; Script changes that.
func New(secrets ...string) (*Receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return NewOn(l, secrets...)
}

// NewOn is New on a listener the caller made (e.g. on an address a target can reach); the
// receiver closes it.
func NewOn(l net.Listener, secrets ...string) (*Receiver, error) {
	r := &Receiver{arrived: make(chan struct{})}
	for _, s := range secrets {
		// The library takes an empty key (strings.Split("", ",") is one empty secret), and
		// with an empty key anyone can sign: refused, so a check never passes on one.
		if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_")); err != nil || len(key) == 0 {
			l.Close()
			return nil, errors.New("webhooktest: a secret is whsec_ followed by base64 of a non-empty key")
		}
		w, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			l.Close()
			return nil, err
		}
		r.secrets = append(r.secrets, w)
		r.raw = append(r.raw, s)
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Listener = l
	r.srv.Start()
	return r, nil
}

// URL is the receiver's base URL, http://127.0.0.1:port.
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Script sets how the receiver answers: f gets the 1-based number of the request and what came.
func (r *Receiver) Script(f func(n int, d Delivery) Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = f
}

// FailFirst answers status to the first n requests, then 204.
func FailFirst(n, status int, h http.Header) func(int, Delivery) Answer {
	return func(i int, _ Delivery) Answer {
		if i <= n {
			return Answer{Status: status, Header: h}
		}
		return Answer{Status: http.StatusNoContent}
	}
}

// Deliveries is every request so far, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Arrived is closed on the next delivery after the call; read Deliveries then.
func (r *Receiver) Arrived() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arrived
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	d := Delivery{
		ID:            req.Header.Get(standardwebhooks.HeaderWebhookID),
		Timestamp:     req.Header.Get(standardwebhooks.HeaderWebhookTimestamp),
		Signature:     req.Header.Get(standardwebhooks.HeaderWebhookSignature),
		Authorization: req.Header.Get("Authorization"),
		Header:        req.Header.Clone(),
		Method:        req.Method,
		Path:          req.URL.RequestURI(),
		Body:          body,
		At:            time.Now(),
	}
	r.mu.Lock()
	d.VerifyError = "no secret"
	for i, s := range r.secrets {
		err := s.Verify(body, req.Header)
		if err == nil {
			if err = ReferenceVerify(r.raw[i], d.ID, d.Timestamp, d.Signature, body, d.At); err != nil {
				err = fmt.Errorf("the Go library verified, the reference receivers' algorithm did not: %w", err)
			}
		}
		if err == nil {
			d.Verified, d.VerifyError = true, ""
			break
		}
		d.VerifyError = err.Error()
	}
	ans := Answer{Status: http.StatusNoContent}
	if r.script != nil {
		ans = r.script(len(r.got)+1, d)
	}
	d.Status = ans.Status
	r.got = append(r.got, d)
	close(r.arrived)
	r.arrived = make(chan struct{})
	r.mu.Unlock()
	if ans.Wait != nil {
		ans.Wait(req.Context())
	}
	for k, vs := range ans.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(ans.Status)
}

// Secret returns a fresh signing secret, whsec_ and the base64 of 32 random bytes.
func Secret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
