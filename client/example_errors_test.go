package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/das-ask/ask/client"
)

// A refusal is an *APIError carrying the service's problem; errors.Is matches it against the
// sentinels by status, errors.As reads what it says.
func ExampleAPIError() {
	baseURL, stop := refusingService()
	defer stop()
	c, _ := client.New(baseURL, client.Options{Token: client.StaticToken("ACCESS_TOKEN")})
	ctx := context.Background()

	for _, conv := range []string{"c_busy", "c_full", "c_yours", "c_crowded"} {
		_, err := c.Ask(ctx, conv, "How many sev1 incidents did we have in 2026-Q2?")
		var apiErr *client.APIError
		switch {
		case err == nil:
			fmt.Println("asked")
		case errors.Is(err, client.ErrConversationFull): // before ErrConflict, which it also matches
			fmt.Println("full: start a new conversation")
		case errors.Is(err, client.ErrConflict) && errors.As(err, &apiErr):
			fmt.Println("already running:", apiErr.RunningTicket())
		case errors.Is(err, client.ErrNotFound):
			fmt.Println("no such conversation (or not yours)")
		case errors.Is(err, client.ErrTooManyRequests) && errors.As(err, &apiErr):
			fmt.Println("too many in flight; try again in", apiErr.RetryAfter)
		default:
			fmt.Println(err) // the operation, the status and the service's reason
		}
	}
	// Output:
	// already running: t_RUNNING
	// full: start a new conversation
	// no such conversation (or not yours)
	// too many in flight; try again in 2s
}

// refusingService refuses every ask as the ask service does, by conversation.
func refusingService() (string, func()) {
	refusals := map[string]struct {
		status           int
		retryAfter, body string
	}{
		"c_busy":    {409, "", `{"type":"about:blank","title":"Conflict","status":409,"detail":"an ask is already running in this conversation","ticket":"t_RUNNING"}`},
		"c_full":    {409, "", `{"type":"about:blank","title":"Conflict","status":409,"detail":"conversation is full; start a new one"}`},
		"c_yours":   {404, "", `{"type":"about:blank","title":"Not Found","status":404,"detail":"no such resource"}`},
		"c_crowded": {429, "2", `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"too many asks in flight for this identity"}`},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ask/v1/conversations/{id}/asks", func(w http.ResponseWriter, r *http.Request) {
		ref := refusals[r.PathValue("id")]
		if ref.retryAfter != "" {
			w.Header().Set("Retry-After", ref.retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(ref.status)
		_, _ = io.WriteString(w, ref.body)
	})
	srv := httptest.NewServer(mux)
	return srv.URL + "/ask", srv.Close
}
