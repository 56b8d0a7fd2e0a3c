package stack

import (
	"context"
	"testing"
	"time"
)

// TestServersCloseIdleConnections: every server of the dev stack (the IdP, the demo source, the
// llm-stub) closes a kept-alive connection left idle, as askd's and demo-source's do; found by
// an audit, none set an IdleTimeout and net/http then keeps such a connection for ever.
func TestServersCloseIdleConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.servers) == 0 {
		t.Fatal("the stack serves nothing")
	}
	for i, srv := range s.servers {
		if srv.IdleTimeout <= 0 || srv.IdleTimeout > idleTimeout {
			t.Errorf("server %d: IdleTimeout %s, want (0, %s]", i, srv.IdleTimeout, idleTimeout)
		}
	}
}
