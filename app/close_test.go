package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/store/redis/redistest"
)

type aliceAuth struct{}

func (aliceAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	return ask.Identity{OID: "alice", Token: tok}, nil
}

// TestCloseIsBoundedWhenRedisIsFrozen: a replica stopped (SIGTERM) while its Redis does not
// answer (SIGSTOPped: connections open, nothing comes back) and an ask runs exits within
// DAS_ASK_SHUTDOWN_GRACE_S + 10 s, as Close's own bound says, not that and the Redis client's
// 30 s backstop for what it still has in flight; the lease ends the ask on another replica
// once Redis is back (docs/scale-out.md).
func TestCloseIsBoundedWhenRedisIsFrozen(t *testing.T) {
	srv := redistest.Start(t)
	cfg := config.DefaultConfig()
	cfg.Addr, cfg.Ops.AdminAddr = "127.0.0.1:0", ""
	cfg.Store.URL, cfg.Store.Prefix = srv.URL, "close:"
	cfg.Service.ShutdownGrace = -1 // none: Close waits only for the runs' ends to be stored
	logs := &logtest.Buffer{}
	m := app.NewMain(cfg)
	m.Logger = slog.New(slog.NewTextHandler(logs, nil))
	m.Authenticator = aliceAuth{}
	started := make(chan struct{})
	m.Runner = ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
		close(started)
		<-ctx.Done()
		return ask.Outcome{}
	})
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+m.Addr()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %s %v %v", path, resp.Status, got, err)
		}
		return got
	}
	conv := post("/ask/v1/conversations", `{}`)
	post(conv["asks_url"].(string), `{"question":"How many?"}`)
	<-started

	if err := syscall.Kill(srv.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(srv.Pid(), syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)

	begin := time.Now()
	cerr := m.Close() // the run's end cannot be stored: an error is expected, said once
	took := time.Since(begin)
	thaw()
	// What the store left running ends once Redis answers again (the package's goleak check
	// holds the test to it).
	redistest.Poll(t, "the store's, the run's and the Redis client's goroutines to end", func() bool {
		buf := make([]byte, 1<<20)
		// Every goroutine but this one, which runtime.Stack puts first (and which is in Poll).
		others := bytes.SplitN(buf[:runtime.Stack(buf, true)], []byte("\n\n"), 2)
		if len(others) < 2 {
			return true
		}
		for _, pkg := range []string{"github.com/redis/go-redis/", "github.com/das-ask/ask/store/", "github.com/das-ask/ask/server."} {
			if bytes.Contains(others[1], []byte(pkg)) {
				return false
			}
		}
		return true
	})
	if bound := 10*time.Second + 5*time.Second; took > bound {
		t.Errorf("Close took %v with Redis frozen, want at most %v (the grace, none here, + 10 s, and room):\n%s", took.Round(time.Millisecond), bound, logs.String())
	}
	// askd prints it as its last line before exit status 1: one line saying what did not end.
	if cerr == nil || strings.Contains(cerr.Error(), "\n") || !strings.Contains(cerr.Error(), "ends were not all stored") {
		t.Errorf("Close: %q, want one line saying the asks' ends were not all stored in time", cerr)
	}
	if !strings.Contains(logs.String(), "store not closed") {
		t.Errorf("no warning that the store was left unclosed:\n%s", logs.String())
	}
}
