package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

func checkBadInput(ctx context.Context, s *session) verdict {
	// Ask bodies the contract rejects with 400: AskRequest is an object with a question of 1
	// to 4000 characters, not white space alone, and nothing else.
	badAsks := []struct{ what, body string }{
		{"not JSON", `{"question":`},
		{"no question", `{}`},
		{"an empty question", `{"question":""}`},
		{"a question of white space only", `{"question":" \t\n\u3000 "}`},
		{"an unknown field", `{"question":"What is an incident?","colour":"blue"}`},
		{"the question given twice", `{"question":"What is an incident?","question":"What is a deployment?"}`},
		{"a question over 4000 characters", `{"question":"` + strings.Repeat("a", 4001) + `"}`},
	}
	conv, err := s.conversation(ctx, A)
	if err != nil {
		return broken(err)
	}
	tok, err := s.token(ctx, A)
	if err != nil {
		return broken(err)
	}
	var found []string
	for _, b := range badAsks {
		resp, err := s.api.CreateAskWithBodyWithResponse(ctx, conv, nil, "application/json", strings.NewReader(b.body), bearer(tok))
		if err != nil {
			return broken(err)
		}
		if resp.StatusCode() != http.StatusBadRequest || mediaType(resp.HTTPResponse.Header) != "application/problem+json" {
			found = append(found, fmt.Sprintf("%s: %d %s", b.what, resp.StatusCode(), mediaType(resp.HTTPResponse.Header)))
		}
	}
	// A well-formed ask that is not sent as application/json: 415, as the contract documents,
	// not taken for JSON whatever it says it is.
	resp, err := s.api.CreateAskWithBodyWithResponse(ctx, conv, nil, "text/plain", strings.NewReader(`{"question":"What is an incident?"}`), bearer(tok))
	if err != nil {
		return broken(err)
	}
	if resp.StatusCode() != http.StatusUnsupportedMediaType || mediaType(resp.HTTPResponse.Header) != "application/problem+json" {
		found = append(found, fmt.Sprintf("a valid ask sent as text/plain: %d %s, want 415 problem+json", resp.StatusCode(), mediaType(resp.HTTPResponse.Header)))
		if t := jsonField(resp.Body, "ticket"); t != "" {
			_ = s.stream(ctx, A, t, cursor{}, nil) // let the run it made end before the next check
		}
	}
	return problems("400 problem+json for an ask body the schema rejects, 415 for one not sent as JSON", found,
		fmt.Sprintf("400 problem+json for %d malformed ask bodies; 415 problem+json for one sent as text/plain", len(badAsks)))
}
