package client_test

import (
	"errors"
	"testing"

	"github.com/das-ask/ask/client"
)

// The 409 of an Idempotency-Key still in progress is retried; once the attempts are spent it is
// returned, and it is not ErrConflict: the conversation is neither running an ask nor full (and a
// createConversation has no conversation at all). It matched ErrConflict, whose RunningTicket
// was then "".
func TestKeyInProgressIsNotErrConflict(t *testing.T) {
	h, keys := flaky(409, 409, 409)
	c := memClient(t, h, client.Options{Retry: client.Retry{Attempts: 3, Initial: quick.Initial, Max: quick.Max}})
	_, err := c.CreateConversation(t.Context())
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 409 || len(*keys) != 3 {
		t.Fatalf("%v after %d attempts, want the 409 after 3", err, len(*keys))
	}
	if errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrConversationFull) {
		t.Errorf("%v matches ErrConflict or ErrConversationFull", err)
	}
}
