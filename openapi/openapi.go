// Package openapi embeds the contract, openapi/ask.openapi.yaml, byte for byte, so the service
// can publish exactly the document its code was generated from.
package openapi

import _ "embed"

// YAML is openapi/ask.openapi.yaml as written.
//
//go:embed ask.openapi.yaml
var YAML []byte
