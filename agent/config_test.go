package agent_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/das-ask/ask/agent"
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

func TestNewNeedsModelAndSources(t *testing.T) {
	if _, err := agent.New(agent.Options{Sources: []agent.SourceConfig{{Name: "d", URL: "http://x/mcp"}}}); err == nil {
		t.Error("New without a model succeeded")
	}
	if _, err := agent.New(agent.Options{Model: &scripted{}}); err == nil {
		t.Error("New without sources succeeded")
	}
}
