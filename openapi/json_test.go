package openapi_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/das-ask/ask/openapi"
)

// The published JSON is the YAML document in another notation: parsed, the two are equal,
// EventType and the operationIds as written included.
func TestJSONIsTheYAML(t *testing.T) {
	b, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML any
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatalf("the JSON does not parse: %v", err)
	}
	if err := yaml.Unmarshal(openapi.YAML, &fromYAML); err != nil {
		t.Fatal(err)
	}
	// yaml decodes integers as int; JSON as float64: compare both through JSON numbers.
	round, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(round, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, want) {
		t.Error("the JSON parsed differs from the YAML parsed")
	}
	doc := fromJSON.(map[string]any)
	if _, ok := doc["components"].(map[string]any)["schemas"].(map[string]any)["EventType"]; !ok {
		t.Error("the JSON has no components.schemas.EventType")
	}
	op := doc["paths"].(map[string]any)["/v1/asks/{ticket}"].(map[string]any)["get"].(map[string]any)["operationId"]
	if op != "getAsk" {
		t.Errorf("getAsk's operationId in the JSON is %v", op)
	}
}

func TestYAMLToJSONKeepsOrderAndTypes(t *testing.T) {
	got, err := openapi.YAMLToJSON([]byte("b: 1\na: [x, 2.5, true, null, '3']\nc: &k {d: e}\nf: *k\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":1,"a":["x",2.5,true,null,"3"],"c":{"d":"e"},"f":{"d":"e"}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := openapi.YAMLToJSON([]byte("? [a, b]\n: c\n")); err == nil {
		t.Error("a sequence as a key: want an error")
	}
}
