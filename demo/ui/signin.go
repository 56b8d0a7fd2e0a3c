package ui

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/das-ask/ask/demo/idp"
)

// SignInFunc returns a bearer for the identity oid. The dev stack mints one with its development
// identity provider.
type SignInFunc func(ctx context.Context, oid string) (string, error)

// validOID is what the sign-in accepts as an identity: a short, plain name.
var validOID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// signIn serves POST /token with a form field oid, answering {"access_token": "..."}.
//
// It hands out any identity, so, like the development identity provider's own /token, it answers
// loopback callers only, and only requests addressed to a loopback host (an IP literal or
// localhost): otherwise a page the developer visits could rebind its DNS name to 127.0.0.1 and
// read a minted token. Forwarding headers are ignored, since anyone can send them. A browser's
// request from another origin (a form another site posts here) is refused too: its page cannot
// read the token, but it would make the developer's browser mint one for whoever it names.
type signIn struct {
	mint SignInFunc
	log  *slog.Logger
}

func (s signIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !idp.LocalRequest(r) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "sign-in is for loopback callers only"})
		return
	}
	if err := sameOrigin.Check(r); err != nil {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "sign-in is for the page's own origin only"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want a form with oid"})
		return
	}
	oid := strings.TrimSpace(r.PostForm.Get("oid"))
	if !validOID.MatchString(oid) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "oid: want 1 to 64 letters, digits, '.', '_' or '-'"})
		return
	}
	token, err := s.mint(r.Context(), oid)
	if err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelError, "ui: sign-in failed", slog.String("oid", oid), slog.Any("error", err))
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"access_token": token, "token_type": "Bearer", "oid": oid})
}

// sameOrigin tells a browser's cross-origin request by its Sec-Fetch-Site or Origin header; a
// request with neither (curl, a program) is not a browser's and passes.
var sameOrigin = http.NewCrossOriginProtection()

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
