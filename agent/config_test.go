package agent_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestConfigDefaultsToTheStub(t *testing.T) {
	c, err := agent.ConfigFromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM != "stub" || c.BaseURL != "http://127.0.0.1:8092/v1" || c.APIKey == "" || c.Model == "" {
		t.Errorf("config = %+v", c)
	}
	if c.Timeout != 120*time.Second || c.MaxRetries != 2 || c.MaxTurns != 12 || c.MaxTokens != 4096 {
		t.Errorf("limits = %+v", c)
	}
	if len(c.Sources) != 1 || c.Sources[0] != (agent.SourceConfig{Name: "demo", URL: "http://127.0.0.1:8091/mcp"}) {
		t.Errorf("sources = %+v", c.Sources)
	}
	if _, err := c.NewModel(nil, nil); err != nil {
		t.Errorf("NewModel: %v", err)
	}
}

func TestConfigProviders(t *testing.T) {
	c, err := agent.ConfigFromLookup(lookup(map[string]string{
		"ASK_LLM": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-secret", "ASK_LLM_MODEL": "claude-x",
		"ASK_LLM_TIMEOUT_S": "30", "ASK_LLM_MAX_RETRIES": "0", "ASK_MAX_TURNS": "5",
		"DAS_SOURCES": "a=http://127.0.0.1:1/mcp,b=http://127.0.0.1:2/mcp",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "claude-x" || c.APIKey != "sk-ant-secret" || c.Timeout != 30*time.Second || c.MaxRetries != 0 || c.MaxTurns != 5 || len(c.Sources) != 2 {
		t.Errorf("config = %+v", c)
	}
	if _, err := c.NewModel(nil, nil); err != nil {
		t.Errorf("NewModel: %v", err)
	}
	// The key stays out of every printed form.
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "cfg", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v", c), c.String(), b.String()} {
		if strings.Contains(s, "sk-ant-secret") {
			t.Errorf("printed config carries the key: %s", s)
		}
	}

	// A local OpenAI-compatible server needs no key.
	c, err = agent.ConfigFromLookup(lookup(map[string]string{"ASK_LLM": "openai", "ASK_LLM_BASE_URL": "http://127.0.0.1:11434/v1", "ASK_LLM_MODEL": "llama3.1"}))
	if err != nil || c.APIKey == "" || c.BaseURL != "http://127.0.0.1:11434/v1" {
		t.Errorf("ollama config = %+v, %v", c, err)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ASK_LLM": "gpt"}, "ASK_LLM"},
		{map[string]string{"ASK_LLM": "anthropic"}, "ANTHROPIC_API_KEY"},
		{map[string]string{"ASK_LLM": "openai"}, "OPENAI_API_KEY"},
		{map[string]string{"ASK_LLM_BASE_URL": "127.0.0.1:8092"}, "ASK_LLM_BASE_URL"},
		{map[string]string{"ASK_LLM_TIMEOUT_S": "-1"}, "ASK_LLM_TIMEOUT_S"},
		{map[string]string{"ASK_LLM_MAX_RETRIES": "many"}, "ASK_LLM_MAX_RETRIES"},
		{map[string]string{"ASK_MAX_TURNS": "0"}, "ASK_MAX_TURNS"},
		{map[string]string{"DAS_SOURCES": "demo"}, "DAS_SOURCES"},
	}
	for _, tt := range tests {
		_, err := agent.ConfigFromLookup(lookup(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want one naming %s", tt.env, err, tt.want)
		}
	}
}

func TestNewNeedsModelAndSources(t *testing.T) {
	if _, err := agent.New(agent.Options{Sources: []agent.SourceConfig{{Name: "d", URL: "http://x/mcp"}}}); err == nil {
		t.Error("New without a model succeeded")
	}
	if _, err := agent.New(agent.Options{Model: &scripted{}}); err == nil {
		t.Error("New without sources succeeded")
	}
}

// ASK_LLM=real, the specification's spelling, is the provider whose key is set; neither or both
// is an error naming both variables, never a guess.
func TestConfigReal(t *testing.T) {
	for _, tt := range []struct {
		env     map[string]string
		llm     string
		problem bool
	}{
		{env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}, llm: "anthropic"},
		{env: map[string]string{"OPENAI_API_KEY": "sk-x"}, llm: "openai"},
		{env: map[string]string{}, problem: true},
		{env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-x"}, problem: true},
	} {
		tt.env["ASK_LLM"] = "real"
		c, err := agent.ConfigFromLookup(lookup(tt.env))
		if tt.problem {
			if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || !strings.Contains(err.Error(), "OPENAI_API_KEY") || strings.Contains(err.Error(), "sk-") {
				t.Errorf("%v: err = %v, want one naming both variables (and no key)", tt.env, err)
			}
			continue
		}
		if err != nil || c.LLM != tt.llm || c.APIKey == "" {
			t.Errorf("%v: config %v, %v; want %s", tt.env, c, err, tt.llm)
		}
	}
}
