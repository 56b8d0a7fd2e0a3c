package llmstub_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/das-ask/ask/demo/llmstub"
)

// bubbleClient is the official client calling the stub's handler in process, so the scripted
// delay runs on the synctest bubble's fake clock.
func bubbleClient(t *testing.T) (*llmstub.Stub, openai.Client) {
	t.Helper()
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return stub, openai.NewClient(
		option.WithBaseURL("http://llm-stub.test/v1/"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: inProcess{stub.Handler()}}),
	)
}

func slowParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "llm-stub", Tools: demoTools(),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(qTakeYourTm)}}
}

// TestDelayHonoured: the "Take your time" question's first turn waits the script's 3s, streamed or
// not; the turns after it do not wait.
func TestDelayHonoured(t *testing.T) {
	for _, stream := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			_, client := bubbleClient(t)
			start := time.Now()
			first := complete(t, client, slowParams(), stream)
			if got := time.Since(start); got != 3*time.Second {
				t.Errorf("stream=%v: first turn took %v, want 3s", stream, got)
			}
			if tc := first.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "search_catalog" {
				t.Fatalf("first turn %+v, want a search_catalog call", first.Choices[0].Message)
			}

			params := slowParams()
			params.Messages = append(params.Messages, first.Choices[0].Message.ToParam(),
				openai.ToolMessage(demoSource{}.answer("search_catalog", map[string]any{"query": "incident"}), first.Choices[0].Message.ToolCalls[0].ID))
			start = time.Now()
			second := complete(t, client, params, stream)
			if got := time.Since(start); got != 0 {
				t.Errorf("stream=%v: second turn took %v, want no wait", stream, got)
			}
			if tc := second.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "define_term" {
				t.Errorf("second turn %+v, want a define_term call", second.Choices[0].Message)
			}
		})
	}
}

// TestDelayCancelled: cancelling the request during the delay ends the wait at once; nothing is
// answered and the log records the client as gone.
func TestDelayCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub, client := bubbleClient(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := client.Chat.Completions.New(ctx, slowParams())
			errc <- err
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("returned after 1s of a 3s delay: %v", err)
		default:
		}
		cancel()
		err := <-errc
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("returned after %v, want 1s (at the cancel)", got)
		}
		reqs := stub.Requests()
		if len(reqs) != 1 || reqs[0].Status != llmstub.StatusClientClosed || reqs[0].Rule != "sev1-count-slow" {
			t.Errorf("request log %+v, want one request with status %d", reqs, llmstub.StatusClientClosed)
		}
	})
}
