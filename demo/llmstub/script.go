package llmstub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
)

// ScriptEnv names the environment variable that overrides the default script with a file.
const ScriptEnv = "ASK_STUB_SCRIPT"

// Script is a parsed, validated script: what the stub answers to which question. It is immutable
// and safe for concurrent use. The format is described in the package documentation.
type Script struct {
	models    []string
	rules     []*rule
	fallback  *template.Template
	onError   *template.Template
	otherwise *template.Template
	// unavailable is the built-in reply when a request does not offer the tool a step needs.
	unavailable *template.Template
}

type rule struct {
	name      string
	pattern   *regexp.Regexp
	history   *historyMatch
	steps     []*step
	final     *template.Template
	onError   *template.Template
	otherwise *template.Template
	// goal: the steps are goals rather than a sequence (see decideGoal).
	goal bool
}

type historyMatch struct {
	role    string
	pattern *regexp.Regexp
}

type step struct {
	tool    string
	args    valueTemplate
	delay   time.Duration
	ifEmpty bool
}

// The YAML shapes. Unknown keys are errors, so a typo in a script fails at load, not at ask.
type scriptFile struct {
	Models    []string   `yaml:"models"`
	Fallback  string     `yaml:"fallback"`
	OnError   string     `yaml:"on_error"`
	Otherwise string     `yaml:"otherwise"`
	Rules     []ruleFile `yaml:"rules"`
}

type ruleFile struct {
	Name        string       `yaml:"name"`
	Pattern     string       `yaml:"pattern"`
	FromHistory *historyFile `yaml:"from_history"`
	Steps       []stepFile   `yaml:"steps"`
	Final       string       `yaml:"final"`
	OnError     string       `yaml:"on_error"`
	Mode        string       `yaml:"mode"`
}

type historyFile struct {
	Role      string `yaml:"role"`
	Pattern   string `yaml:"pattern"`
	Otherwise string `yaml:"otherwise"`
}

type stepFile struct {
	Tool    string         `yaml:"tool"`
	Args    map[string]any `yaml:"args"`
	Delay   string         `yaml:"delay"`
	IfEmpty string         `yaml:"if_empty"`
}

// Built-in prose for a script that does not set its own.
const (
	defaultFallback  = "I can't answer that question with the tools I have."
	defaultOnError   = "I'm sorry, I couldn't answer that: the {{.Failed.Tool}} call failed."
	defaultOtherwise = "I can't tell what you are referring to from our conversation so far. Could you say it explicitly?"
	defaultModel     = "llm-stub"
	toolUnavailable  = "I can't answer that: the {{.Tool}} tool is not available to me."
)

// ParseScript parses and validates a script in the YAML format described in the package
// documentation. Every pattern and template is compiled here, so a script that parses cannot fail
// on a malformed rule later; the error names the rule and field at fault.
func ParseScript(data []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f scriptFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("llmstub: script is empty")
		}
		return nil, fmt.Errorf("llmstub: script: %w", err)
	}
	s := &Script{models: f.Models}
	if len(s.models) == 0 {
		s.models = []string{defaultModel}
	}
	var err error
	if s.fallback, err = prose("fallback", orDefault(f.Fallback, defaultFallback)); err != nil {
		return nil, err
	}
	if s.onError, err = prose("on_error", orDefault(f.OnError, defaultOnError)); err != nil {
		return nil, err
	}
	if s.otherwise, err = prose("otherwise", orDefault(f.Otherwise, defaultOtherwise)); err != nil {
		return nil, err
	}
	if s.unavailable, err = prose("tool_unavailable", toolUnavailable); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i, rf := range f.Rules {
		r, err := s.parseRule(rf)
		if err != nil {
			return nil, fmt.Errorf("llmstub: rule %d (%q): %w", i, rf.Name, err)
		}
		if names[r.name] {
			return nil, fmt.Errorf("llmstub: rule %d: duplicate name %q", i, r.name)
		}
		names[r.name] = true
		s.rules = append(s.rules, r)
	}
	return s, nil
}

// LoadScript reads and parses the script at path.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llmstub: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// ScriptFromEnv returns the script named by $ASK_STUB_SCRIPT, or the default script when it is
// unset or empty.
func ScriptFromEnv() (*Script, error) {
	if path := os.Getenv(ScriptEnv); path != "" {
		return LoadScript(path)
	}
	return DefaultScript()
}

// Models lists the model ids GET /v1/models reports. Requests may name any model.
func (s *Script) Models() []string { return append([]string(nil), s.models...) }

func (s *Script) parseRule(rf ruleFile) (*rule, error) {
	if rf.Name == "" {
		return nil, errors.New("name is required")
	}
	if rf.Pattern == "" {
		return nil, errors.New("pattern is required")
	}
	if rf.Final == "" {
		return nil, errors.New("final is required")
	}
	r := &rule{name: rf.Name, onError: s.onError, otherwise: s.otherwise}
	switch rf.Mode {
	case "", "sequence":
	case "goal":
		r.goal = true
	default:
		return nil, fmt.Errorf("mode: %q is not sequence or goal", rf.Mode)
	}
	var err error
	if r.pattern, err = regexp.Compile("(?i)" + rf.Pattern); err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	if r.final, err = prose("final", rf.Final); err != nil {
		return nil, err
	}
	if rf.OnError != "" {
		if r.onError, err = prose("on_error", rf.OnError); err != nil {
			return nil, err
		}
	}
	if h := rf.FromHistory; h != nil {
		if h.Role != "assistant" && h.Role != "user" {
			return nil, fmt.Errorf("from_history.role: %q is not assistant or user", h.Role)
		}
		if h.Pattern == "" {
			return nil, errors.New("from_history.pattern is required")
		}
		r.history = &historyMatch{role: h.Role}
		if r.history.pattern, err = regexp.Compile("(?i)" + h.Pattern); err != nil {
			return nil, fmt.Errorf("from_history.pattern: %w", err)
		}
		if h.Otherwise != "" {
			if r.otherwise, err = prose("from_history.otherwise", h.Otherwise); err != nil {
				return nil, err
			}
		}
	}
	for j, sf := range rf.Steps {
		st, err := parseStep(sf)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", j, err)
		}
		if st.ifEmpty && j == 0 {
			return nil, fmt.Errorf("step %d: if_empty needs a previous step", j)
		}
		r.steps = append(r.steps, st)
	}
	return r, nil
}

func parseStep(sf stepFile) (*step, error) {
	if !functionName.MatchString(sf.Tool) {
		return nil, fmt.Errorf("tool: %q is not a valid function name", sf.Tool)
	}
	st := &step{tool: sf.Tool}
	var err error
	if st.args, err = compileValue("args", sf.Args); err != nil {
		return nil, err
	}
	if sf.Delay != "" {
		if st.delay, err = time.ParseDuration(sf.Delay); err != nil || st.delay < 0 {
			return nil, fmt.Errorf("delay: %q is not a non-negative duration", sf.Delay)
		}
	}
	switch sf.IfEmpty {
	case "":
	case "final":
		st.ifEmpty = true
	default:
		return nil, fmt.Errorf("if_empty: %q is not \"final\"", sf.IfEmpty)
	}
	return st, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
