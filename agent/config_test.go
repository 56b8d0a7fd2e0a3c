package agent_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/internal/loopback"
)

// The environment's spelling of these settings is tested in package config.

func TestDefaultConfigIsTheStub(t *testing.T) {
	c := agent.DefaultConfig()
	if c.LLM != "stub" || c.BaseURL != "http://127.0.0.1:8092/v1" || c.MaxModelCalls != agent.DefaultMaxModelCalls {
		t.Errorf("config = %+v", c)
	}
	if _, err := c.NewModel(nil, nil); err != nil {
		t.Errorf("NewModel: %v", err)
	}
}

func TestConfigKeepsTheKeyOutOfPrint(t *testing.T) {
	c := agent.Config{LLM: agent.LLMAnthropic, APIKey: "sk-ant-secret", Model: "claude-x", MaxRetries: -1}
	if _, err := c.NewModel(nil, nil); err != nil {
		t.Errorf("NewModel: %v", err)
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "cfg", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v", c), c.String(), b.String()} {
		if strings.Contains(s, "sk-ant-secret") {
			t.Errorf("printed config carries the key: %s", s)
		}
	}
}

// TestConfigKeepsABaseURLPasswordOutOfPrint: a password in ASK_LLM_BASE_URL is shown as xxxxx
// wherever the configuration is printed or logged; make ask-serve's banner printed it.
func TestConfigKeepsABaseURLPasswordOutOfPrint(t *testing.T) {
	c := agent.Config{LLM: agent.LLMOpenAI, BaseURL: "http://u:hunter2@127.0.0.1:1/v1", Model: "qwen2.5"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "cfg", c)
	for _, s := range []string{fmt.Sprint(c), c.String(), b.String()} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "http://u:xxxxx@127.0.0.1:1/v1") {
			t.Errorf("printed config: %s; want the base URL with its password as xxxxx", s)
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

// TestModelCallFailedNamesTheConfiguredProvider: the warning of a failed model call names the
// provider as ASK_LLM does, the label of ask_model_errors_total and the span's gen_ai.system,
// so that the line and the metric can be matched. Found by an operator's audit: with ASK_LLM=stub
// and the llm-stub down, the metric said provider="stub" and the line "provider":"openai", the
// adapter's name.
func TestModelCallFailedNamesTheConfiguredProvider(t *testing.T) {
	dead := loopback.Refused(t) // nothing listens there: the call fails at once
	for _, llm := range []string{agent.LLMStub, agent.LLMOpenAI} {
		var b strings.Builder
		c := agent.DefaultConfig()
		c.LLM, c.BaseURL, c.MaxRetries = llm, "http://"+dead+"/v1", -1
		m, err := c.NewModel(nil, slog.New(slog.NewJSONHandler(&b, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}}); err == nil {
			t.Fatal("a call to a dead provider succeeded")
		}
		if want := `"msg":"model call failed","provider":"` + llm + `"`; !strings.Contains(b.String(), want) {
			t.Errorf("ASK_LLM=%s: the line %s lacks %s", llm, b.String(), want)
		}
	}
}
