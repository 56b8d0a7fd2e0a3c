package idp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// TokenRequest is the body of POST /token, as a form or as JSON.
type TokenRequest struct {
	OID string `json:"oid"`
	// TID is the tenant (`tid`); "" mints a token without one. Given, it must be printable
	// text of at most MaxTIDLen bytes, not empty once trimmed.
	TID     string `json:"tid,omitempty"`
	Aud     string `json:"aud,omitempty"`
	Scope   string `json:"scope,omitempty"`
	TTLS    int    `json:"ttl_s,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	Alg     string `json:"alg,omitempty"`
}

// TokenResponse is the answer of POST /token.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// serveToken mints a token, for loopback callers only: this endpoint hands out any identity.
// The peer address is what counts; forwarding headers are ignored, since anyone can send them.
// The Host must name loopback too (an IP literal or localhost) or be the issuer's own host:
// otherwise a web page the developer visits could rebind its DNS name to 127.0.0.1 and read a
// minted token. A browser's request from another origin (a form a web page posts here) is
// refused: that page cannot read the token, but would have the developer's browser mint one.
func (p *IdP) serveToken(w http.ResponseWriter, r *http.Request) {
	if !LoopbackAddr(r.RemoteAddr) {
		oauthError(w, http.StatusForbidden, "access_denied", "tokens are minted for loopback callers only")
		return
	}
	if !LoopbackHost(r.Host) && !strings.EqualFold(r.Host, p.issuerHost) {
		oauthError(w, http.StatusForbidden, "access_denied", "tokens are minted for requests addressed to a loopback host only")
		return
	}
	if err := sameOrigin.Check(r); err != nil {
		oauthError(w, http.StatusForbidden, "access_denied", "tokens are not minted for a web page of another origin")
		return
	}
	req, tidGiven, err := decodeTokenRequest(r)
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if strings.TrimSpace(req.OID) == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "oid is required")
		return
	}
	tid := strings.TrimSpace(req.TID)
	if tidGiven {
		if err := checkTID(tid); err != nil {
			oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
	}
	if req.TTLS < 0 || time.Duration(req.TTLS)*time.Second > MaxTTL {
		oauthError(w, http.StatusBadRequest, "invalid_request", "ttl_s must be between 1 and "+strconv.Itoa(int(MaxTTL/time.Second)))
		return
	}
	alg := normAlg(req.Alg)
	if alg != RS256 && alg != ES256 {
		oauthError(w, http.StatusBadRequest, "invalid_request", "alg must be RS256 or ES256")
		return
	}
	c := Claims{
		OID:      strings.TrimSpace(req.OID),
		TID:      tid,
		Audience: req.Aud,
		Scope:    strings.Join(strings.Fields(req.Scope), " "),
		TTL:      time.Duration(req.TTLS) * time.Second,
		Expired:  req.Expired,
		Alg:      alg,
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	token, err := p.Mint(c)
	if err != nil {
		p.log.LogAttrs(r.Context(), slog.LevelError, "idp: mint failed", slog.Any("error", err))
		oauthError(w, http.StatusInternalServerError, "server_error", "internal error")
		return
	}
	expiresIn := int(c.TTL / time.Second)
	if c.Expired {
		expiresIn = 0
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, TokenResponse{AccessToken: token, TokenType: "Bearer", ExpiresIn: expiresIn})
}

// sameOrigin tells a browser's cross-origin request by its Sec-Fetch-Site or Origin header; a
// request with neither (curl, dev-idp token, a client) is not a browser's and passes.
var sameOrigin = http.NewCrossOriginProtection()

// MaxTIDLen bounds a tenant given to POST /token, in bytes: a tenant id is a name or a GUID
// (36), never a document.
const MaxTIDLen = 256

// checkTID judges a tid given to POST /token, already trimmed: a tid given empty (or only
// spaces) is a mistake, not "no tenant", which is asked for by leaving tid out.
func checkTID(tid string) error {
	switch {
	case tid == "":
		return errors.New("tid, when given, must not be empty: leave it out for a token without a tenant")
	case len(tid) > MaxTIDLen:
		return fmt.Errorf("tid must be at most %d bytes", MaxTIDLen)
	}
	for _, r := range tid {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return errors.New("tid must be printable UTF-8 text: no control characters")
		}
	}
	return nil
}

// decodeTokenRequest reads the body of POST /token; tidGiven says whether it named tid at all
// (a tid given empty is refused, where one left out means no tenant).
func decodeTokenRequest(r *http.Request) (req TokenRequest, tidGiven bool, err error) {
	r.Body = http.MaxBytesReader(nil, r.Body, maxTokenBody)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var body struct {
			TokenRequest
			TID *string `json:"tid"` // shadows TokenRequest.TID, to tell "" from absent
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			return req, false, errors.New("body: want a JSON object with oid, tid, aud, scope, ttl_s, expired, alg")
		}
		if dec.Decode(&struct{}{}) != io.EOF {
			return req, false, errors.New("body: want exactly one JSON object")
		}
		req = body.TokenRequest
		if body.TID != nil {
			req.TID, tidGiven = *body.TID, true
		}
		return req, tidGiven, nil
	case "application/x-www-form-urlencoded", "":
		if err := r.ParseForm(); err != nil {
			return req, false, errors.New("body: want a form with oid, tid, aud, scope, ttl_s, expired, alg")
		}
		req.OID, req.Aud, req.Scope, req.Alg = r.PostForm.Get("oid"), r.PostForm.Get("aud"), r.PostForm.Get("scope"), r.PostForm.Get("alg")
		if v, ok := r.PostForm["tid"]; ok {
			if len(v) != 1 {
				return req, false, errors.New("tid: give it once")
			}
			req.TID, tidGiven = v[0], true
		}
		if s := r.PostForm.Get("ttl_s"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return req, false, errors.New("ttl_s: want whole seconds")
			}
			req.TTLS = n
		}
		if s := r.PostForm.Get("expired"); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return req, false, errors.New("expired: want true or false")
			}
			req.Expired = b
		}
		return req, tidGiven, nil
	}
	return req, false, errors.New("content type: want application/json or application/x-www-form-urlencoded")
}
