package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/das-ask/ask/gen"
)

// refusedEverywhere makes two calls with the given Authorization header value ("" sends none):
// opening a conversation and reading a ticket's status. Each must be a 401 problem+json with a
// WWW-Authenticate Bearer challenge.
func (s *session) refusedEverywhere(ctx context.Context, authorization string) verdict {
	editor := func(_ context.Context, r *http.Request) error {
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		return nil
	}
	var found []string
	conv, err := s.api.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{}, editor)
	if err != nil {
		return broken(err)
	}
	presented := authorization != ""
	found = append(found, unauthorizedProblems("POST /v1/conversations", conv.HTTPResponse, presented)...)
	st, err := s.api.GetAskWithResponse(ctx, "tk_"+randomHex(), nil, editor)
	if err != nil {
		return broken(err)
	}
	found = append(found, unauthorizedProblems("GET /v1/asks/{ticket}", st.HTTPResponse, presented)...)
	challenge := "a Bearer challenge without an error attribute (none was sent)"
	if presented {
		challenge = "a Bearer challenge with an error attribute"
	}
	return problems("401, application/problem+json and WWW-Authenticate: Bearer on every call, with an error attribute exactly when a bearer was sent (RFC 6750 §3.1)", found,
		"401 problem+json with "+challenge+" on POST /v1/conversations and GET /v1/asks/{ticket}")
}

// errorAttr matches the error attribute of a challenge (not error_description or error_uri).
var errorAttr = regexp.MustCompile(`(?i)(^|[\s,])error\s*=`)

// unauthorizedProblems checks a 401; presented says whether the request carried a bearer, in
// which case the challenge names the error (RFC 6750 §3), and otherwise names none (§3.1).
func unauthorizedProblems(call string, resp *http.Response, presented bool) []string {
	var out []string
	if resp.StatusCode != http.StatusUnauthorized {
		out = append(out, fmt.Sprintf("%s answered %d", call, resp.StatusCode))
	}
	if mt := mediaType(resp.Header); mt != "application/problem+json" {
		out = append(out, fmt.Sprintf("%s Content-Type %q", call, mt))
	}
	ch := resp.Header.Get("WWW-Authenticate")
	switch {
	case !strings.HasPrefix(strings.ToLower(ch), "bearer"):
		out = append(out, fmt.Sprintf("%s WWW-Authenticate %q", call, ch))
	case presented && !errorAttr.MatchString(ch):
		out = append(out, fmt.Sprintf("%s refused a bearer with WWW-Authenticate %q: no error attribute", call, ch))
	case !presented && errorAttr.MatchString(ch):
		out = append(out, fmt.Sprintf("%s without credentials answered WWW-Authenticate %q: an error attribute", call, ch))
	}
	return out
}

// accepted makes sure a valid token of A is accepted, so that a refusal of a bad one means
// something.
func (s *session) acceptsValid(ctx context.Context) error {
	_, err := s.conversation(ctx, A)
	if err != nil {
		return fmt.Errorf("a valid token of A: %w", err)
	}
	return nil
}

func checkNoBearer(ctx context.Context, s *session) verdict {
	return s.refusedEverywhere(ctx, "")
}

func checkMalformedBearer(ctx context.Context, s *session) verdict {
	return s.refusedEverywhere(ctx, "Bearer not-a-jwt")
}

func checkForgedBearer(ctx context.Context, s *session) verdict {
	if err := s.acceptsValid(ctx); err != nil {
		return broken(err)
	}
	tok, err := s.token(ctx, A)
	if err != nil {
		return broken(err)
	}
	forged, err := forge(tok)
	if err != nil {
		return skip("cannot forge from A's token: %v", err)
	}
	return s.refusedEverywhere(ctx, "Bearer "+forged)
}

func (s *session) mintedRefused(ctx context.Context, kind TokenKind, what string) verdict {
	tok, err := s.cfg.Tokens.Token(ctx, A, kind)
	if errors.Is(err, ErrCannotMint) {
		return skip("fixed tokens cannot be made %s; give an identity provider's mint URL (--idp)", what)
	}
	if err != nil {
		return broken(err)
	}
	if err := s.acceptsValid(ctx); err != nil {
		return broken(err)
	}
	return s.refusedEverywhere(ctx, "Bearer "+tok)
}

func checkExpiredBearer(ctx context.Context, s *session) verdict {
	return s.mintedRefused(ctx, Expired, "expired")
}

func checkWrongAudience(ctx context.Context, s *session) verdict {
	return s.mintedRefused(ctx, WrongAudience, "for another audience")
}
