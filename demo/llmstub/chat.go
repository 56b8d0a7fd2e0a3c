package llmstub

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

const fingerprint = "fp_llmstub"

// handleChat serves POST /v1/chat/completions: validate, decide, wait the step's delay (if any),
// then answer as JSON or as an SSE stream. Every request, valid or not, lands in the request log.
func (s *Stub) handleChat(w http.ResponseWriter, r *http.Request) {
	rec := Received{Method: r.Method, Path: r.URL.Path}
	defer func() { s.received.add(rec) }()
	fail := func(aerr *apiError) {
		rec.Status, rec.Error = aerr.status, aerr.message
		// Logged before the reply is written, so a client that has its reply finds the line.
		s.log.Info("chat completion rejected", "status", aerr.status, "param", aerr.param)
		writeAPIError(w, aerr)
	}
	if aerr := s.authorize(r); aerr != nil {
		fail(aerr)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(&apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				message: "Request body too large."})
			return
		}
		fail(invalidRequest("", "", "We could not read the body of your request."))
		return
	}
	req, aerr := parseRequest(body)
	if aerr != nil {
		fail(aerr)
		return
	}
	rec.Model, rec.Stream, rec.Messages, rec.Tools = req.model, req.stream, req.messages, req.tools

	rp, err := s.script.decide(req.messages, req.tools)
	rec.Rule, rec.Decision = rp.rule, rp.decision
	if err != nil {
		// A template that cannot render is a script bug: say so loudly rather than invent prose.
		s.log.Error("script failed to render a reply", "rule", rp.rule, "decision", rp.decision, "err", err)
		aerr := &apiError{status: http.StatusInternalServerError, typ: "server_error",
			message: "The llm-stub script failed to render a reply for rule " + rp.rule + "; see the stub's log."}
		rec.Status, rec.Error = aerr.status, aerr.message
		writeAPIError(w, aerr)
		return
	}
	rp = capReply(rp, req.maxTokens)
	rec.ToolCall, rec.Content = rp.call, rp.content

	if err := wait(r.Context(), rp.delay); err != nil {
		rec.Status = StatusClientClosed
		s.log.Info("client went away during the scripted delay", "rule", rp.rule, "step", rp.step)
		return
	}
	u := usageOf(req, rp)
	rec.Status = http.StatusOK
	// Logged before the reply is written, so a client that has its reply finds the line.
	attrs := []any{"rule", rp.rule, "decision", rp.decision, "step", rp.step, "stream", req.stream,
		"prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens}
	if rp.call != nil {
		attrs = append(attrs, "tool", rp.call.Name)
	}
	s.log.Info("chat completion", attrs...)
	if req.stream {
		if err := s.writeStream(w, req, rp, u); err != nil {
			s.log.Info("stream write failed", "rule", rp.rule, "err", err)
		}
	} else {
		writeJSON(w, http.StatusOK, s.completion(req, rp, u))
	}
}

// wait blocks for d, or until ctx is done (the client went away or the server is shutting down).
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func finishReason(rp reply) string {
	if rp.cut {
		return "length"
	}
	if rp.call != nil {
		return "tool_calls"
	}
	return "stop"
}

// completion builds the non-streaming response.
func (s *Stub) completion(req *request, rp reply, u usage) completion {
	msg := responseMessage{Role: "assistant"}
	if rp.call != nil {
		msg.ToolCalls = []responseToolCall{{ID: rp.call.ID, Type: "function",
			Function: responseFunction{Name: rp.call.Name, Arguments: rp.call.Arguments}}}
	} else {
		content := rp.content
		msg.Content = &content
	}
	return completion{
		ID:                rp.id("chatcmpl-", 0),
		Object:            "chat.completion",
		Created:           s.now().Unix(),
		Model:             req.model,
		SystemFingerprint: fingerprint,
		Choices:           []completionChoice{{Index: 0, Message: msg, FinishReason: finishReason(rp)}},
		Usage:             u,
	}
}
