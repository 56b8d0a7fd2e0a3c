package server

import (
	"encoding/json"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestSchemaReason: kin-openapi's reasons pass as they are, except those that speak of Go.
func TestSchemaReason(t *testing.T) {
	typed := func(types ...string) *openapi3.Schema {
		ts := openapi3.Types(types)
		return &openapi3.Schema{Type: &ts}
	}
	for _, tc := range []struct {
		name string
		se   openapi3.SchemaError
		want string
	}{
		{"kin-openapi's own", openapi3.SchemaError{Schema: typed("string"), SchemaField: "minLength", Reason: "minimum string length is 1"},
			"minimum string length is 1"},
		{"wrong type", openapi3.SchemaError{Schema: typed("string"), SchemaField: "type", Reason: "value must be a string"},
			"value must be a string"},
		{"huge number for a string", openapi3.SchemaError{Value: json.Number("1e999"), Schema: typed("string"), SchemaField: "type",
			Reason: "cannot convert json.Number to float64"}, "value must be a string"},
		{"huge number for an integer", openapi3.SchemaError{Value: json.Number("1e999"), Schema: typed("integer"), SchemaField: "type",
			Reason: "cannot convert json.Number to float64"}, "number is out of range"},
		{"null for an object", openapi3.SchemaError{Schema: typed("object"), SchemaField: "nullable", Reason: "Value is not nullable"},
			"value must be an object"},
		{"null for either", openapi3.SchemaError{Schema: typed("string", "integer"), SchemaField: "nullable", Reason: "Value is not nullable"},
			"value must be one of string, integer"},
		{"null for any", openapi3.SchemaError{Schema: &openapi3.Schema{}, SchemaField: "nullable", Reason: "Value is not nullable"},
			"value must not be null"},
		{"odd value for any", openapi3.SchemaError{Schema: &openapi3.Schema{}, SchemaField: "type", Reason: "unhandled value of type chan int"},
			"value is not valid here"},
	} {
		if got := schemaReason(&tc.se); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
