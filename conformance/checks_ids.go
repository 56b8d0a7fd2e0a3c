package conformance

import (
	"context"
	"fmt"
	"net/http"
)

// checkBadIDs: an id that does not match the contract's pattern is bad input on every call
// that takes one: 400 problem+json, a status the contract documents for that call (the
// contract once left it out of cancelAsk).
func checkBadIDs(ctx context.Context, s *session) verdict {
	const bad = "bad%21id" // "bad!id": outside ^[A-Za-z0-9_-]+$
	var found []string
	for _, c := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodGet, "/v1/asks/" + bad, nil},
		{http.MethodGet, "/v1/asks/" + bad + "/events", nil},
		{http.MethodPost, "/v1/asks/" + bad + "/cancel", nil},
		{http.MethodPost, "/v1/conversations/" + bad + "/asks", []byte(`{"question":"How many?"}`)},
	} {
		r, err := s.do(ctx, A, c.method, c.path, c.body, nil)
		if err != nil {
			return broken(err)
		}
		if why := s.refusedWith(ctx, r, c.method, c.path, http.StatusBadRequest, false); why != "" {
			found = append(found, fmt.Sprintf("%s %s: %s", c.method, templateOf(exchange{Method: c.method, Path: c.path}), why))
		}
	}
	return problems("400 problem+json, documented for the call, for an id outside the contract's pattern", found,
		"400 problem+json, as documented, for a malformed ticket or conversation id on all four calls that take one")
}
