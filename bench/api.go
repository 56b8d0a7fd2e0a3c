package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/das-ask/ask/gen"
)

// askAPI is one identity's view of a service (ours or the bare handler), through the
// generated client.
type askAPI struct {
	c *gen.Client
}

func newAskAPI(baseURL string, hc *http.Client, token string) (*askAPI, error) {
	c, err := gen.NewClient(baseURL, gen.WithHTTPClient(hc), gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		return nil, err
	}
	return &askAPI{c: c}, nil
}

// conversation opens a conversation and returns its id.
func (a *askAPI) conversation(ctx context.Context) (string, error) {
	resp, err := a.c.CreateConversation(ctx, nil, gen.CreateConversationRequest{})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", statusError("createConversation", resp)
	}
	var conv gen.Conversation
	if err := json.NewDecoder(resp.Body).Decode(&conv); err != nil {
		return "", err
	}
	return conv.Id, nil
}

// ask puts question to conversation cid and returns the ticket; anything but 202 is an error.
func (a *askAPI) ask(ctx context.Context, cid, question string) (string, error) {
	resp, err := a.c.CreateAsk(ctx, cid, nil, gen.AskRequest{Question: question})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", statusError("createAsk", resp)
	}
	var t gen.Ticket
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return t.Ticket, nil
}

// stream opens a ticket's event stream after cursor (-1: no Last-Event-ID).
func (a *askAPI) stream(ctx context.Context, ticket string, cursor int64) (*http.Response, error) {
	var p gen.StreamEventsParams
	if cursor >= 0 {
		s := strconv.FormatInt(cursor, 10)
		p.LastEventID = &s
	}
	resp, err := a.c.StreamEvents(ctx, ticket, &p)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, statusError("streamEvents", resp)
	}
	return resp, nil
}

// readToDone reads a stream to its done event and closes it; it returns what it counted.
func readToDone(resp *http.Response) (*sseCounter, error) {
	defer resp.Body.Close()
	s := newSSECounter(resp.Body)
	return s, s.until(isDone)
}

func statusError(op string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("bench: %s: %s: %s", op, resp.Status, b)
}
