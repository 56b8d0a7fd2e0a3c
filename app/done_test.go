package app_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

// failingListener is a listener whose Accept fails for good once broken, as a listener closed
// under the server (or one whose socket the kernel took away) does.
type failingListener struct {
	net.Listener
	once   sync.Once
	broken chan struct{}
}

var errGone = errors.New("listener gone")

func (l *failingListener) Accept() (net.Conn, error) {
	select {
	case <-l.broken:
		return nil, errGone
	default:
	}
	c, err := l.Listener.Accept()
	select {
	case <-l.broken:
		if c != nil {
			c.Close()
		}
		return nil, errGone
	default:
	}
	return c, err
}

func (l *failingListener) breakNow() {
	l.once.Do(func() { close(l.broken); l.Listener.Close() })
}

// TestCloseAfterServeFailed: when the API's Serve ends by itself, Done says so and Close then
// stops the rest and returns, as askd does (its "serving: … (and stopping: …)" exit). Close
// waited for Serve's end on the channel Done had already emptied, so askd hung for good.
func TestCloseAfterServeFailed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner, broken: make(chan struct{})}
	cfg := config.DefaultConfig()
	cfg.Ops.AdminAddr = ""
	m := app.NewMain(cfg)
	m.Listener = ln
	m.Authenticator = aliceAuth{}
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	ln.breakNow()
	select {
	case err := <-m.Done():
		if !errors.Is(err, errGone) {
			t.Errorf("Done: %v, want the listener's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Done reported nothing after Serve failed")
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, errGone) {
			t.Errorf("Close: %v, want Serve's error among Close's", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return after Done reported Serve's end")
	}
}
