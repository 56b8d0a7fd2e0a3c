package llmstub_test

import (
	"context"
	"net"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/demo/llmstub"
)

// TestServe: Serve answers on its listener until its context ends, then returns nil and leaves no
// goroutine behind.
func TestServe(t *testing.T) {
	defer goleak.VerifyNone(t)
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- stub.Serve(ctx, ln) }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/models: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve returned %v after its context ended, want nil", err)
	}
	client.CloseIdleConnections()
	if reqs := stub.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/models" {
		t.Errorf("log %+v", reqs)
	}
}
