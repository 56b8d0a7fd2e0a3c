package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// cancelAfterAsk is a Doer that ends the caller's context once the service has answered the ask
// (its body read in full): the caller's deadline falling just after the ticket came back.
type cancelAfterAsk struct {
	next   *http.Client
	cancel context.CancelFunc
}

func (d cancelAfterAsk) Do(r *http.Request) (*http.Response, error) {
	resp, err := d.next.Do(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/asks") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	d.cancel()
	return resp, err
}

// A call the service answered is answered, even if ctx ended as the answer came: the ticket was
// issued and the run is spending the caller's quota. Ask returned ctx's error and dropped the
// ticket, so AskAndWait, which promises to return the ticket whenever one was issued and to
// cancel the run when ctx ends first, left the run going with nobody to follow or cancel it.
func TestAskAndWaitCancelsATicketIssuedAsCtxEnded(t *testing.T) {
	svc := startService(t, 0)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	alice := svc.client(t, svc.http.URL, "alice-token", tr)
	conv, err := alice.CreateConversation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := client.New(svc.http.URL+"/ask", client.Options{
		Token: client.StaticToken("alice-token"), HTTPClient: cancelAfterAsk{next: &http.Client{Transport: tr}, cancel: cancel},
	})
	if err != nil {
		t.Fatal(err)
	}
	tk, _, err := c.AskAndWait(ctx, conv.Id, "gated")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("AskAndWait: %v, want context.Canceled", err)
	}
	if tk.Ticket == "" {
		t.Fatal("AskAndWait returned no ticket, but the service issued one")
	}
	out, err := alice.Wait(t.Context(), tk.Ticket)
	if err != nil || out.Kind != client.Error || out.Error.Kind != gen.ErrorKindCancelled {
		t.Fatalf("the run ended %v (%+v), %v; want error{cancelled}", out.Kind, out.Error, err)
	}
}
