package eval_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/eval"
)

// A truth source that takes the connection and never answers is said within the oracle's
// timeout (ask-eval's --ask-timeout), naming it: before, --truth-source at a frozen source
// hung the eval, before any question, until it was killed.
func TestSourceOracleTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	const bound = 300 * time.Millisecond
	o := &eval.SourceOracle{URL: "http://" + ln.Addr().String() + "/mcp", Timeout: bound,
		Token: func(context.Context) (string, error) { return "t", nil }}
	_, _, err = o.Query(t.Context(), "SELECT 1")
	if want := "the truth source at http://" + ln.Addr().String() + "/mcp did not answer within 300ms"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}
