// Package openapi embeds the contract, openapi/ask.openapi.yaml, byte for byte, so the service
// can publish exactly the document its code was generated from.
package openapi

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// YAML is openapi/ask.openapi.yaml as written.
//
//go:embed ask.openapi.yaml
var YAML []byte

// servers is the document's servers list as written: one entry, the default mount point.
const servers = "\nservers:\n  - url: /ask\n"

// Mounted is YAML as a service mounted at base (its DAS_ASK_PATH, normalised: "" for the root)
// publishes it: the servers entry names base, so that a client or tool built from the published
// document calls the paths the service answers. At the default mount, /ask, it is YAML byte for
// byte; elsewhere only the server's url differs.
func Mounted(base string) []byte {
	if base == "/ask" {
		return YAML
	}
	if base == "" {
		base = "/"
	}
	url, _ := json.Marshal(base) // a JSON string is a YAML double-quoted scalar
	out := bytes.Replace(YAML, []byte(servers), []byte("\nservers:\n  - url: "+string(url)+"\n"), 1)
	if bytes.Equal(out, YAML) {
		panic("openapi: the document's servers entry is not " + servers + " as Mounted expects")
	}
	return out
}

// Load parses YAML and validates it as OpenAPI 3, for the tests that hold the service's answers
// to the document. Each call returns a fresh document, so a caller may change its copy (its
// servers, say) without touching another's.
func Load(ctx context.Context) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(YAML)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, err
	}
	return doc, nil
}

// CheckResponse holds one response of route to the document: its status is documented for the
// operation, the headers it promises are there, and the body (unless skipBody: a HEAD's, or an
// event stream's, which is checked frame by frame) matches its schema, formats included.
func CheckResponse(ctx context.Context, route *routers.Route, status int, header http.Header, body []byte, skipBody bool) error {
	req, err := http.NewRequestWithContext(ctx, route.Method, "http://ask.test/", nil)
	if err != nil {
		return err
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: route},
		Status:                 status,
		Header:                 header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true, MultiError: true,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()},
			ExcludeResponseBody:     skipBody,
		},
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(ctx, in)
}
