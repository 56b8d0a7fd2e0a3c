//go:build linux || darwin || freebsd

package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/creack/pty"

	askconfig "github.com/das-ask/ask/config"
)

// On a real terminal the spinner is chosen by itself (no ASK_PROGRESS): the terminal check sees
// the process's own files, not the writer that serializes them. The terminal is a pseudo-terminal
// whose other end this test reads.
func TestSpinnerOnARealTerminal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		spinner bool
	}{
		{name: "a terminal", env: map[string]string{}, spinner: true},
		{name: "a terminal with ASK_PROGRESS=plain", env: map[string]string{"ASK_PROGRESS": "plain"}, spinner: false},
		{name: "a dumb terminal", env: map[string]string{"TERM": "dumb"}, spinner: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal here: %v", err)
			}
			defer ptmx.Close()
			var mu sync.Mutex
			var seen bytes.Buffer
			read := make(chan error, 1)
			go func() {
				_, err := io.Copy(writerFunc(func(p []byte) (int, error) {
					mu.Lock()
					defer mu.Unlock()
					return seen.Write(p)
				}), ptmx)
				read <- err
			}()

			svc := newFakeService()
			svc.Send(fAccepted, fMilestone, fAnswer, fDone)
			env := map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()}
			for k, v := range tc.env {
				env[k] = v
			}
			code := runWith(t.Context(), []string{"--token", "t", "q"}, nil, tty, tty, askconfig.MapEnv(env), &http.Client{Transport: svc})
			tty.Close() // the reader then sees the end of the terminal's output (EIO on Linux)
			if err := <-read; err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "input/output error") {
				t.Fatalf("reading the terminal: %v", err)
			}
			if code != exitAnswer {
				t.Fatalf("exit %d, terminal:\n%q", code, seen.String())
			}
			mu.Lock()
			out := seen.String()
			mu.Unlock()
			// The spinner rewrites its live line: a carriage return, erase-line, a frame.
			hasSpinner := strings.Contains(out, "\x1b[2K") && strings.ContainsAny(out, strings.Join(spinnerFrames, ""))
			if hasSpinner != tc.spinner {
				t.Errorf("spinner shown: %v, want %v; the terminal saw:\n%q", hasSpinner, tc.spinner, out)
			}
			if !strings.Contains(out, "Looking up 'incident' in the catalog…") || !strings.Contains(out, "Four.") {
				t.Errorf("the terminal lacks the milestone or the answer:\n%q", out)
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
