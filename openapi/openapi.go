// Package openapi embeds the contract, openapi/ask.openapi.yaml, byte for byte, so the service
// can publish exactly the document its code was generated from.
package openapi

import (
	"context"
	_ "embed"

	"github.com/getkin/kin-openapi/openapi3"
)

// YAML is openapi/ask.openapi.yaml as written.
//
//go:embed ask.openapi.yaml
var YAML []byte

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
