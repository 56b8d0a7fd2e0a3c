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

const (
	openaiProse = `{"id":"chatcmpl-2","object":"chat.completion","created":1764400001,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":"There were 3.","refusal":null}}],` +
		`"usage":{"prompt_tokens":150,"completion_tokens":6,"total_tokens":156}}`
	anthropicProse = "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":210,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"There were 3."}}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}` + "\n\n" +
		"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"
)

// A model provider's response header is bounded (MaxResponseHeaderBytes, 64 KiB) as a source's
// is: with the default client, net/http read up to 10 MiB of header lines into memory on every
// call. A provider answering 1 MiB of header lines fails the call in transport; the same reply with a few
// lines is read. Both adapters, each with a nil HTTPClient as askd builds them.
func TestResponseHeaderIsBounded(t *testing.T) {
	adapters := []struct {
		name, contentType, body string
		new                     func(url string) (model.Model, error)
	}{
		{"openai", "application/json", openaiProse, func(url string) (model.Model, error) {
			return openai.New(openai.Options{BaseURL: url + "/v1", Model: "gpt-4o-mini", APIKey: "sk-test", MaxTokens: 512})
		}},
		{"anthropic", "text/event-stream", anthropicProse, func(url string) (model.Model, error) {
			return anthropic.New(anthropic.Options{BaseURL: url, Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", MaxTokens: 512})
		}},
	}
	for _, a := range adapters {
		for _, tt := range []struct {
			lines    int
			wantFail bool
		}{{8, false}, {1 << 10, true}} {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i := range tt.lines {
					w.Header().Add("X-Padding", strings.Repeat(string(rune('a'+i%26)), 1<<10))
				}
				w.Header().Set("Content-Type", a.contentType)
				w.Write([]byte(a.body))
			}))
			m, err := a.new(hs.URL)
			if err != nil {
				hs.Close()
				t.Fatal(err)
			}
			resp, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "how many?"}}})
			hs.Close()
			switch {
			case tt.wantFail && model.KindOf(err) != model.KindTransport:
				t.Errorf("%s with %d KiB of header lines: %+v, %v; want the call to fail in transport", a.name, tt.lines, resp, err)
			case !tt.wantFail && (err != nil || resp.Text != "There were 3."):
				t.Errorf("%s with %d KiB of header lines: %+v, %v; want the reply", a.name, tt.lines, resp, err)
			}
		}
	}
}
