package llmstub

import _ "embed"

//go:embed default-script.yaml
var defaultScript []byte

// DefaultScript returns the embedded default script, which answers the README's example
// questions against the demo source. Each call parses a fresh copy; the embedded text is tested,
// so an error here means the binary was built from a broken tree.
func DefaultScript() (*Script, error) { return ParseScript(defaultScript) }

// DefaultScriptYAML returns the text of the embedded default script, as a starting point for a
// script of one's own.
func DefaultScriptYAML() []byte { return append([]byte(nil), defaultScript...) }
