package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.yaml.in/yaml/v3"
)

// JSON returns the contract as JSON: the same document as YAML, key for key, in the YAML's
// order. It is not oapi-codegen's embedded copy (gen.GetSpecJSON), which is the document as
// kin-openapi re-serialises it (operationIds capitalised, unused schemas such as EventType
// dropped): the published JSON must be this document in another notation, nothing else.
func JSON() ([]byte, error) { return jsonOnce() }

var jsonOnce = sync.OnceValues(func() ([]byte, error) { return YAMLToJSON(YAML) })

// YAMLToJSON converts one YAML document to JSON, keeping the order of mapping keys. Anchors
// and aliases are expanded; a mapping key must be a scalar.
func YAMLToJSON(doc []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var b bytes.Buffer
	if err := writeNode(&b, &root); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return b.Bytes(), nil
}

func writeNode(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("want exactly one document")
		}
		return writeNode(b, n.Content[0])
	case yaml.AliasNode:
		return writeNode(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a mapping key that is not a scalar", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			key, err := json.Marshal(k.Value)
			if err != nil {
				return err
			}
			b.Write(key)
			b.WriteByte(':')
			if err := writeNode(b, v); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeNode(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.Write(out)
	default:
		return fmt.Errorf("line %d: an unexpected YAML node", n.Line)
	}
	return nil
}
