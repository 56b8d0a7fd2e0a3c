package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/das-ask/ask/client"
)

// idpSource mints tokens for one identity from the dev identity provider (POST /token) and
// mints again shortly before a token expires. Safe for concurrent use.
type idpSource struct {
	url  string
	oid  string
	http *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time
	reuse   time.Duration // how much of the token's life must be left for Token to hand it out again
}

var _ client.TokenSource = (*idpSource)(nil)

// mintTimeout bounds one request for a token: an identity provider that does not answer is
// said, not waited on for ever.
const mintTimeout = 10 * time.Second

// reuseLeft is how much of a token's life must be left for it to be handed out again: a run
// forwards the token it was asked with to every source until it ends (the service's default
// deadline is 120 s, DAS_ASK_DEADLINE_S), so a token with 30 s left made a run fail with the
// source's 401 half-way. Five minutes, or half the life of a token that lives less than ten.
func reuseLeft(lifetime time.Duration) time.Duration {
	return min(5*time.Minute, lifetime/2)
}

// Token returns a token with enough of its life left to outlast a run (reuseLeft), minting
// one when needed.
func (s *idpSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Until(s.expires) > s.reuse {
		return s.token, nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, mintTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"oid": s.oid})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.url, "/")+"/token", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		if parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("the dev identity provider at %s did not answer within %s", s.url, mintTimeout)
		}
		return "", fmt.Errorf("the dev identity provider at %s: %w", s.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("the dev identity provider at %s: %w", s.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the dev identity provider at %s answered %s", s.url, resp.Status)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("the dev identity provider at %s sent no access_token", s.url)
	}
	lifetime := time.Duration(max(tr.ExpiresIn, 60)) * time.Second
	s.token, s.expires, s.reuse = tr.AccessToken, time.Now().Add(lifetime), reuseLeft(lifetime)
	return s.token, nil
}

// oidOf reads the unverified `oid` claim of a JWT. The token is never stored; an unreadable
// token yields "".
func oidOf(token string) string { oid, _ := claimsOf(token); return oid }

// identityOf names a JWT's identity, unverified, as the service owns by it: its oid and, when
// it has one, its tenant (`tid`), to key the state file. Keyed by the oid alone, the same oid
// in two tenants shared one entry: --continue as one asked in the other's conversation (a 404,
// then a new one that the other's --continue then found in its place). "" when unreadable.
func identityOf(token string) string {
	oid, tid := claimsOf(token)
	if oid == "" || tid == "" {
		return oid
	}
	return oid + " tid=" + strconv.Quote(tid)
}

// claimsOf reads the unverified `oid` and `tid` claims of a JWT ("" for either it lacks).
func claimsOf(token string) (oid, tid string) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", ""
	}
	// A map, not a struct: encoding/json matches a struct's fields in any case ("OID"), and
	// claim names are case-sensitive (RFC 7519 §4), as the service reads them.
	var claims map[string]any
	if json.Unmarshal(payload, &claims) != nil {
		return "", ""
	}
	oid, _ = claims["oid"].(string)
	tid, _ = claims["tid"].(string)
	return oid, tid
}

// errNoToken explains how to get a token when none could be had.
var errNoToken = errors.New("no token: pass --token or set ASK_TOKEN, or start the dev stack (make ask-serve) so its identity provider can mint one")
