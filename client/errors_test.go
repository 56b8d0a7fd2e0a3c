package client_test

import (
	"testing"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// An APIError says what the service said: the detail (or a title that says more than the
// status), and the violations a 400 lists, which say what to change.
func TestAPIErrorSaysWhy(t *testing.T) {
	detail := "the request does not satisfy the API description"
	errs := []string{"body/question: maximum string length is 4000"}
	for _, tt := range []struct {
		err  client.APIError
		want string
	}{
		{client.APIError{Op: "createAsk", StatusCode: 400, Problem: &gen.Problem{Title: "Bad Request", Detail: &detail, Errors: &errs}},
			"ask createAsk: 400 Bad Request: the request does not satisfy the API description (body/question: maximum string length is 4000)"},
		{client.APIError{Op: "createAsk", StatusCode: 400, Problem: &gen.Problem{Title: "Bad Request", Errors: &errs}},
			"ask createAsk: 400 Bad Request: body/question: maximum string length is 4000"},
		{client.APIError{Op: "getAsk", StatusCode: 404, Problem: &gen.Problem{Title: "Not Found"}}, "ask getAsk: 404 Not Found"},
		{client.APIError{Op: "getAsk", StatusCode: 409, Problem: &gen.Problem{Title: "Conversation busy"}}, "ask getAsk: 409 Conflict: Conversation busy"},
		{client.APIError{Op: "getAsk", StatusCode: 502}, "ask getAsk: 502 Bad Gateway"},
		// A status RFC 9110 renamed is said by its new name, and its title, new or old, is the status.
		{client.APIError{Op: "createAsk", StatusCode: 413, Problem: &gen.Problem{Title: "Content Too Large"}}, "ask createAsk: 413 Content Too Large"},
		{client.APIError{Op: "createAsk", StatusCode: 413, Problem: &gen.Problem{Title: "Request Entity Too Large"}}, "ask createAsk: 413 Content Too Large"},
		{client.APIError{Op: "createAsk", StatusCode: 422, Problem: &gen.Problem{Title: "Unprocessable Content"}}, "ask createAsk: 422 Unprocessable Content"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
