package ask_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/das-ask/ask"
)

// An Identity or a Request passed to a logger as an attribute by mistake leaves the token and
// the question out of the line, with either of askd's log formats (DAS_LOG_FORMAT): the JSON
// handler marshals a struct field by field and never asks its String method.
func TestIdentityAndRequestKeepSecretsOutOfLogs(t *testing.T) {
	const token, question = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2lnbmF0dXJlLXNlY3JldA", "how much do we pay on-call"
	id := ask.Identity{OID: "alice", Tenant: "https://idp", Scopes: []string{"das"}, Token: token}
	req := ask.Request{Ticket: "t_1", ConversationID: "c_1", Question: question,
		History: []ask.Turn{{Question: question, Text: "before"}}, Identity: id}
	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			slog.New(newHandler(&b)).Info("run", "identity", id, "request", req, slog.Any("req", req))
			got := b.String()
			for _, secret := range []string{token, "c2lnbmF0dXJlLXNlY3JldA", question} {
				if strings.Contains(got, secret) {
					t.Errorf("the log line holds %q:\n%s", secret, got)
				}
			}
			for _, want := range []string{"alice", "t_1", "c_1"} {
				if !strings.Contains(got, want) {
					t.Errorf("the log line lost %q:\n%s", want, got)
				}
			}
		})
	}
}
