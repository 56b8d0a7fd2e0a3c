package client

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/das-ask/ask/gen"
)

// CreateConversation opens a conversation to ask within. It belongs to the token's identity.
// The call carries an Idempotency-Key and is retried as Options.Retry says: a retry answers the
// same conversation.
func (c *Client) CreateConversation(ctx context.Context) (gen.Conversation, error) {
	key := newIdempotencyKey()
	params := &gen.CreateConversationParams{IdempotencyKey: &key}
	r, err := retrying(ctx, c, "createConversation", func(ctx context.Context) (*gen.CreateConversationResponse, *http.Response, []byte, error) {
		r, err := c.api.CreateConversationWithResponse(ctx, params, gen.CreateConversationJSONRequestBody{})
		if err != nil {
			return nil, nil, nil, err
		}
		return r, r.HTTPResponse, r.Body, nil
	})
	if err != nil {
		return gen.Conversation{}, err
	}
	if r.JSON201 == nil {
		return gen.Conversation{}, apiError("createConversation", r.HTTPResponse, r.Body)
	}
	return *r.JSON201, nil
}

// Ask puts a question in a conversation and returns its ticket, which the service issues before
// any work runs. A second ask while one is running in the conversation fails with an error
// matching ErrConflict; [APIError.RunningTicket] names the running one. The call carries an
// Idempotency-Key and is retried as Options.Retry says: a retry answers the same ticket, never
// a second ask.
func (c *Client) Ask(ctx context.Context, conversationID, question string) (gen.Ticket, error) {
	return c.AskWith(ctx, conversationID, question, AskOptions{})
}

// AskOptions are the optional parts of an ask.
type AskOptions struct {
	// Webhook, when set, is a URL the service POSTs the run's end to (terminal event and done,
	// signed per Standard Webhooks; verify with the operator's whsec_ secret). It must be under a
	// prefix the operator allows, else the ask fails with a 400 (an *APIError) and no ticket is created.
	// Status shows how delivery goes (AskStatus.Webhook).
	Webhook string
}

// AskWith is Ask with options.
func (c *Client) AskWith(ctx context.Context, conversationID, question string, opts AskOptions) (gen.Ticket, error) {
	body := gen.CreateAskJSONRequestBody{Question: question}
	if opts.Webhook != "" {
		body.Webhook = &gen.WebhookRequest{Url: opts.Webhook}
	}
	key := newIdempotencyKey()
	params := &gen.CreateAskParams{IdempotencyKey: &key}
	r, err := retrying(ctx, c, "createAsk", func(ctx context.Context) (*gen.CreateAskResponse, *http.Response, []byte, error) {
		r, err := c.api.CreateAskWithResponse(ctx, conversationID, params, body)
		if err != nil {
			return nil, nil, nil, err
		}
		return r, r.HTTPResponse, r.Body, nil
	})
	if err != nil {
		return gen.Ticket{}, err
	}
	if r.JSON202 == nil {
		return gen.Ticket{}, apiError("createAsk", r.HTTPResponse, r.Body)
	}
	return *r.JSON202, nil
}

// Status returns a ticket's state and, once it has ended, its terminal event and done. With a
// positive wait the service holds the call up to that long (rounded up to whole seconds, at most
// 60 s) for the run to end: a long-poll for callers that do not read the event stream.
func (c *Client) Status(ctx context.Context, ticket string, wait time.Duration) (gen.AskStatus, error) {
	var params gen.GetAskParams
	if wait > 0 {
		secs := int(math.Ceil(min(wait, 60*time.Second).Seconds()))
		pref := "wait=" + strconv.Itoa(secs)
		params.Prefer = &pref
	}
	r, err := retrying(ctx, c, "getAsk", func(ctx context.Context) (*gen.GetAskResponse, *http.Response, []byte, error) {
		r, err := c.api.GetAskWithResponse(ctx, ticket, &params)
		if err != nil {
			return nil, nil, nil, err
		}
		return r, r.HTTPResponse, r.Body, nil
	})
	if err != nil {
		return gen.AskStatus{}, err
	}
	if r.JSON200 == nil {
		return gen.AskStatus{}, apiError("getAsk", r.HTTPResponse, r.Body)
	}
	return *r.JSON200, nil
}

// Cancel asks the service to stop a run. It is idempotent: cancelling an ended run changes
// nothing and is not an error. The run then ends with error{kind: cancelled} and done.
func (c *Client) Cancel(ctx context.Context, ticket string) (gen.CancelAccepted, error) {
	r, err := retrying(ctx, c, "cancelAsk", func(ctx context.Context) (*gen.CancelAskResponse, *http.Response, []byte, error) {
		r, err := c.api.CancelAskWithResponse(ctx, ticket)
		if err != nil {
			return nil, nil, nil, err
		}
		return r, r.HTTPResponse, r.Body, nil
	})
	if err != nil {
		return gen.CancelAccepted{}, err
	}
	if r.JSON202 == nil {
		return gen.CancelAccepted{}, apiError("cancelAsk", r.HTTPResponse, r.Body)
	}
	return *r.JSON202, nil
}

// apiError builds the error for a response that is not the operation's success.
func apiError(op string, resp *http.Response, body []byte) *APIError {
	e := &APIError{Op: op}
	if resp == nil {
		return e
	}
	e.StatusCode = resp.StatusCode
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		var p gen.Problem
		if json.Unmarshal(body, &p) == nil && (p.Status != 0 || p.Title != "") {
			e.Problem = &p
		}
	}
	e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	return e
}

// retryAfter reads a Retry-After header given in seconds (the form this service uses).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
