//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	askconfig "github.com/das-ask/ask/config"
)

// A reader of ask's output that goes away (ask --json … | head -1, once head has its line) is the
// person having gone: the run is cancelled as Ctrl-C cancels it, once, and ask exits 4. The next
// write killed ask with SIGPIPE (status 141 in a shell), and the run went on, uncancelled, on the
// service, spending its owner's quota with no one to read it.
func TestAReaderGoneCancelsTheRun(t *testing.T) {
	cancelled := make(chan struct{}, 8)
	readerGone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(p, "/v1/conversations"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)
		case r.Method == http.MethodPost && strings.HasSuffix(p, "/asks"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"ticket":"tk","conversation_id":"cv","events_url":"e","status_url":"s","cancel_url":"c","created_at":"2026-11-29T20:00:00Z"}`)
		case r.Method == http.MethodPost && strings.HasSuffix(p, "/cancel"):
			cancelled <- struct{}{}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"ticket":"tk","state":"running"}`)
		case r.Method == http.MethodGet && strings.HasSuffix(p, "/events"):
			w.Header().Set("Content-Type", "text/event-stream")
			send := func(frames ...string) {
				for _, f := range frames {
					_, _ = io.WriteString(w, f)
				}
				w.(http.Flusher).Flush()
			}
			send(fAccepted)
			select {
			case <-readerGone:
			case <-r.Context().Done():
				return
			}
			send(fMilestone)
			select {
			case <-cancelled:
			case <-r.Context().Done():
				return
			}
			send(frameOf(3, "error", `,"kind":"cancelled","message":"cancelled"`),
				frameOf(4, "done", `,"outcome":"error","steps":0,"model_calls":0,"input_tokens":0,"output_tokens":0,"elapsed_ms":1`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "--json", "--token", "t", "--url", srv.URL+"/ask", "q")
	cmd.Env = append(os.Environ(), asTheCommand+"=1", "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, `"type":"accepted"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
	_ = out.Close() // the reader goes, as head -1 does once it has its line
	close(readerGone)
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled():
		t.Fatalf("ask was killed by %v once its reader had gone; the run was not cancelled (stderr %q)", exit.Sys().(syscall.WaitStatus).Signal(), stderr.String())
	case errors.As(err, &exit) && exit.ExitCode() == exitError:
	default:
		t.Fatalf("ask ended with %v, want status %d (stderr %q)", err, exitError, stderr.String())
	}
	// The cancel the events handler took is the one; no other was sent.
	if n := len(cancelled); n != 0 {
		t.Errorf("%d cancels more than the one", n)
	}
}

// The reader of stdout going while the outcome is written (ask Q | head -1, which takes the
// answer's first line) ends ctx once the run has ended: that cancels nothing, says nothing of a
// cancel, and the status is the outcome's.
func TestAReaderGoneAfterTheOutcomeCancelsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()})
		ctx, gone := context.WithCancel(t.Context())
		defer gone()
		stdout := writerFunc(func([]byte) (int, error) {
			gone() // as the SIGPIPE of this write does (untilReaderGone)
			synctest.Wait()
			return 0, syscall.EPIPE
		})
		var stderr bytes.Buffer
		svc.Send(fAccepted, fMilestone, fAnswer, fDone)
		code := runWith(ctx, []string{"--token", "t", "q"}, nil, stdout, &stderr, env, &http.Client{Transport: svc})
		if code != exitAnswer || svc.Cancels() != 0 {
			t.Fatalf("exit %d after %d cancels, want %d after none", code, svc.Cancels(), exitAnswer)
		}
		if strings.Contains(stderr.String(), "Cancelling") {
			t.Errorf("stderr %q speaks of a cancel", stderr.String())
		}
	})
}
