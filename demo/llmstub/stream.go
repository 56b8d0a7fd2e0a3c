package llmstub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// pieceBytes is about how much text one streamed delta carries; it only shapes the stream.
const pieceBytes = 16

// writeStream answers as the real API streams: a first chunk with the role (and, for a tool call,
// its id, type and name), then the content or the arguments in pieces, then a chunk with the
// finish_reason, then — when stream_options.include_usage was set — a chunk with no choices and
// the usage, then `data: [DONE]`. Each chunk is flushed as it is written.
func (s *Stub) writeStream(w http.ResponseWriter, req *request, rp reply, u usage) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	base := chunk{ID: rp.id("chatcmpl-", 0), Object: "chat.completion.chunk", Created: s.now().Unix(),
		Model: req.model, SystemFingerprint: fingerprint}
	if req.includeUsage {
		base.Usage = json.RawMessage("null")
	}
	send := func(c chunk) error {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	choice := func(d delta, finish *string) error {
		c := base
		c.Choices = []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
		return send(c)
	}

	zero := 0
	if rp.call != nil {
		first := delta{Role: "assistant", ToolCalls: []responseToolCall{{Index: &zero, ID: rp.call.ID, Type: "function",
			Function: responseFunction{Name: rp.call.Name, Arguments: ""}}}}
		if err := choice(first, nil); err != nil {
			return err
		}
		for _, p := range pieces(rp.call.Arguments) {
			d := delta{ToolCalls: []responseToolCall{{Index: &zero, Function: responseFunction{Arguments: p}}}}
			if err := choice(d, nil); err != nil {
				return err
			}
		}
	} else {
		empty := ""
		if err := choice(delta{Role: "assistant", Content: &empty}, nil); err != nil {
			return err
		}
		for _, p := range pieces(rp.content) {
			if err := choice(delta{Content: &p}, nil); err != nil {
				return err
			}
		}
	}
	finish := finishReason(rp)
	if err := choice(delta{}, &finish); err != nil {
		return err
	}
	if req.includeUsage {
		c := base
		c.Choices = []chunkChoice{}
		b, err := json.Marshal(u)
		if err != nil {
			return err
		}
		c.Usage = b
		if err := send(c); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprint(w, "data: [DONE]\n\n"); err != nil {
		return err
	}
	return rc.Flush()
}

// pieces cuts s into consecutive pieces of about pieceBytes, never inside a UTF-8 sequence.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(pieceBytes, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
