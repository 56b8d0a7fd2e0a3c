package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
		resp, err := c.raw.CreateConversation(ctx, params, gen.CreateConversationJSONRequestBody{})
		return parseResponse("createConversation", resp, err, gen.ParseCreateConversationResponse, func(b []byte) *gen.CreateConversationResponse {
			return &gen.CreateConversationResponse{Body: b, HTTPResponse: resp}
		})
	})
	if err != nil {
		return gen.Conversation{}, err
	}
	if r.JSON201 == nil || r.JSON201.Id == "" {
		if r.StatusCode() < 300 {
			return gen.Conversation{}, unexpected("createConversation", r.HTTPResponse)
		}
		ae := apiError("createConversation", r.HTTPResponse, r.Body)
		if ae.StatusCode == http.StatusNotFound {
			// The path names no resource, so the contract has no 404 here: nothing serves
			// the API at the base URL.
			ae.hint = "nothing serves the ask API at the base URL " + c.base + ": it ends at the API's prefix, such as http://127.0.0.1:8080/ask"
		}
		return gen.Conversation{}, ae
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
		resp, err := c.raw.CreateAsk(ctx, conversationID, params, body)
		return parseResponse("createAsk", resp, err, gen.ParseCreateAskResponse, func(b []byte) *gen.CreateAskResponse {
			return &gen.CreateAskResponse{Body: b, HTTPResponse: resp}
		})
	})
	if err != nil {
		return gen.Ticket{}, err
	}
	if r.JSON202 == nil || r.JSON202.Ticket == "" {
		if r.StatusCode() < 300 {
			return gen.Ticket{}, unexpected("createAsk", r.HTTPResponse)
		}
		return gen.Ticket{}, apiError("createAsk", r.HTTPResponse, r.Body)
	}
	return *r.JSON202, nil
}

// Status returns a ticket's state and, once it has ended, its terminal event and done. With a
// positive wait the service holds the call up to that long (rounded up to whole seconds, at most
// 60 s) for the run to end: a long-poll for callers that do not read the event stream.
// [StatusOutcome] folds the result into an Outcome.
func (c *Client) Status(ctx context.Context, ticket string, wait time.Duration) (gen.AskStatus, error) {
	var params gen.GetAskParams
	if wait > 0 {
		secs := int(math.Ceil(min(wait, 60*time.Second).Seconds()))
		pref := "wait=" + strconv.Itoa(secs)
		params.Prefer = &pref
	}
	r, err := retrying(ctx, c, "getAsk", func(ctx context.Context) (*gen.GetAskResponse, *http.Response, []byte, error) {
		resp, err := c.raw.GetAsk(ctx, ticket, &params)
		return parseResponse("getAsk", resp, err, gen.ParseGetAskResponse, func(b []byte) *gen.GetAskResponse {
			return &gen.GetAskResponse{Body: b, HTTPResponse: resp}
		})
	})
	if err != nil {
		return gen.AskStatus{}, err
	}
	if r.JSON200 == nil || r.JSON200.Ticket == "" {
		if r.StatusCode() < 300 {
			return gen.AskStatus{}, unexpected("getAsk", r.HTTPResponse)
		}
		return gen.AskStatus{}, apiError("getAsk", r.HTTPResponse, r.Body)
	}
	return *r.JSON200, nil
}

// Cancel asks the service to stop a run. It is idempotent: cancelling an ended run changes
// nothing and is not an error. The run then ends with error{kind: cancelled} and done.
func (c *Client) Cancel(ctx context.Context, ticket string) (gen.CancelAccepted, error) {
	r, err := retrying(ctx, c, "cancelAsk", func(ctx context.Context) (*gen.CancelAskResponse, *http.Response, []byte, error) {
		resp, err := c.raw.CancelAsk(ctx, ticket)
		return parseResponse("cancelAsk", resp, err, gen.ParseCancelAskResponse, func(b []byte) *gen.CancelAskResponse {
			return &gen.CancelAskResponse{Body: b, HTTPResponse: resp}
		})
	})
	if err != nil {
		return gen.CancelAccepted{}, err
	}
	if r.JSON202 == nil || r.JSON202.Ticket == "" {
		if r.StatusCode() < 300 {
			return gen.CancelAccepted{}, unexpected("cancelAsk", r.HTTPResponse)
		}
		return gen.CancelAccepted{}, apiError("cancelAsk", r.HTTPResponse, r.Body)
	}
	return *r.JSON202, nil
}

// parseResponse reads resp (the result of one generated call, err its transport error) with the
// generated parser. A refusal that parser cannot bind — a gateway's or proxy's Retry-After given
// as an HTTP date where the contract says seconds, or a body labelled JSON that is not the
// contract's problem — is still a refusal: it comes back as bare, the response without its typed
// parts, so the caller reports its status (an APIError) rather than a parse error retried as if
// the connection had failed. A success whose body is not a JSON object labelled JSON (a web
// server's page, a proxy's), or is one the operation's type cannot hold, is an
// *UnexpectedResponseError, final.
func parseResponse[R any](op string, resp *http.Response, err error, parse func(*http.Response) (R, error), bare func([]byte) R) (R, *http.Response, []byte, error) {
	var zero R
	if err != nil {
		return zero, nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return zero, nil, nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if resp.StatusCode < 300 && (!strings.Contains(resp.Header.Get("Content-Type"), "json") || !jsonObject(body)) {
		return zero, nil, nil, unexpected(op, resp)
	}
	r, err := parse(resp)
	if err != nil {
		if resp.StatusCode >= 300 {
			return bare(body), resp, body, nil
		}
		// JSON, but not the operation's (a field of another type): as final as a web page,
		// not a connection that failed, to be retried.
		u := unexpected(op, resp)
		u.Err = err
		return zero, nil, nil, u
	}
	return r, resp, body, nil
}

// jsonObject reports whether b is one JSON object.
func jsonObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// unexpected is the error of a success that is not the operation's.
func unexpected(op string, resp *http.Response) *UnexpectedResponseError {
	return &UnexpectedResponseError{Op: op, StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
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

// retryAfter reads a Retry-After header: delay-seconds (the form this service uses) or an HTTP
// date (which a gateway or proxy in front of it may send); 0 when absent, past or unreadable.
// A number of seconds too large for a time.Duration (or an int64) is the largest duration: multiplied as it is, it
// wrapped round, to a negative wait (no wait at all) or some other one than asked.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return time.Duration(min(max(n, 0), int64(math.MaxInt64/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
