package openapi_test

import (
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/routers"

	"github.com/das-ask/ask/openapi"
)

// CheckResponse, which the contract tests hold every answer to, passes a documented answer and
// fails an undocumented status, a body off its schema and a Content-Type the operation does not
// document.
func TestCheckResponse(t *testing.T) {
	doc, err := openapi.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var route *routers.Route
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "getAsk" {
				route = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
			}
		}
	}
	if route == nil {
		t.Fatal("no getAsk in the document")
	}
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	for _, c := range []struct {
		name   string
		status int
		header http.Header
		body   string
		ok     bool
	}{
		{"a documented 404", 404, problem, `{"type":"about:blank","title":"Not Found","status":404}`, true},
		{"an undocumented status", 418, problem, `{"type":"about:blank","title":"I'm a teapot","status":418}`, false},
		{"a problem without its title", 404, problem, `{"type":"about:blank","status":404}`, false},
		{"a status out of the schema's range", 404, problem, `{"type":"about:blank","title":"Not Found","status":4040}`, false},
		{"an undocumented Content-Type", 404, http.Header{"Content-Type": {"text/html"}}, `<h1>404</h1>`, false},
	} {
		err := openapi.CheckResponse(t.Context(), route, c.status, c.header, []byte(c.body), false)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
