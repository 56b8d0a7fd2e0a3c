package model_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/model/anthropic"
	"github.com/das-ask/ask/agent/model/openai"
)

// A model provider's response body is bounded (ResponseBound of the output cap, here 512 tokens)
// as a source's is: a provider,
// or a gateway or local server at ASK_LLM_BASE_URL, answering with a reply of 20 MiB had it
// read whole and carried as the answer's text into the run's events and the conversation. A
// reply over the bound fails the call in transport, saying so; one of 1 MiB is read. Both
// adapters, each with a nil HTTPClient as askd builds them.
func TestResponseBodyIsBounded(t *testing.T) {
	adapters := []struct {
		name, contentType string
		body              func(text string) string
		new               func(url string) (model.Model, error)
	}{
		{"openai", "application/json", func(text string) string { return strings.Replace(openaiProse, "There were 3.", text, 1) },
			func(url string) (model.Model, error) {
				return openai.New(openai.Options{BaseURL: url + "/v1", Model: "gpt-4o-mini", APIKey: "sk-test", MaxTokens: 512})
			}},
		{"anthropic", "text/event-stream", func(text string) string { return strings.Replace(anthropicProse, "There were 3.", text, 1) },
			func(url string) (model.Model, error) {
				return anthropic.New(anthropic.Options{BaseURL: url, Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", MaxTokens: 512})
			}},
	}
	for _, a := range adapters {
		for _, tt := range []struct {
			size     int
			wantFail bool
		}{{1 << 20, false}, {int(model.ResponseBound(512)) + 1, true}} {
			text := strings.Repeat("y", tt.size)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", a.contentType)
				w.Write([]byte(a.body(text)))
			}))
			m, err := a.new(hs.URL)
			if err != nil {
				hs.Close()
				t.Fatal(err)
			}
			resp, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "how many?"}}})
			hs.Close()
			switch {
			case tt.wantFail && (model.KindOf(err) != model.KindTransport || !strings.HasSuffix(err.Error(), ": response larger than the limit")):
				t.Errorf("%s with a reply of %d bytes: %d bytes of text, %v; want the call to fail in transport, saying why", a.name, tt.size, len(resp.Text), err)
			case !tt.wantFail && (err != nil || resp.Text != text):
				t.Errorf("%s with a reply of %d bytes: %d bytes of text, %v; want the reply", a.name, tt.size, len(resp.Text), err)
			}
		}
	}
}
