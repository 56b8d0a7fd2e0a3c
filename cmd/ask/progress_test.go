package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	askconfig "github.com/das-ask/ask/config"
)

func frameOf(seq int, typ, body string) string {
	return fmt.Sprintf("id: %d\nevent: %s\ndata: {\"seq\":%d,\"ticket\":\"tk\",\"conversation_id\":\"cv\",\"ts\":\"2026-11-29T20:00:00Z\",\"type\":%q%s}\n\n", seq, typ, seq, typ, body)
}

var (
	fAccepted  = frameOf(1, "accepted", `,"question":"q"`)
	fMilestone = frameOf(2, "milestone", `,"phase":"grounding","subject":"incident","source":"demo"`)
	fAnswer    = frameOf(3, "answer", `,"text":"Four.","caveats":[],"path":{"speed":"full","detail":"warehouse"},"provenance":[],"sql":[],"divergence":null`)
	fDone      = frameOf(4, "done", `,"outcome":"answer","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`)
)

// On a terminal, a silent run shows a live spinner line with the current phase and its age;
// the milestone itself stays as a line of its own.
func TestSpinnerWhileSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "ASK_PROGRESS": "tty", "XDG_STATE_HOME": t.TempDir()})
		var stdout, stderr bytes.Buffer
		done := make(chan int)
		go func() {
			done <- runWith(t.Context(), []string{"--token", "t", "q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc})
		}()
		svc.Send(fAccepted, fMilestone)
		time.Sleep(3 * time.Second) // the model thinks, silently
		svc.Send(fAnswer, fDone)
		if code := <-done; code != exitAnswer {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
		errs := stderr.String()
		if !strings.Contains(errs, "Looking up 'incident' in the catalog…\n") {
			t.Errorf("stderr lacks the milestone line: %q", errs)
		}
		if !strings.Contains(errs, "Looking up 'incident' in the catalog… 2s") {
			t.Errorf("stderr lacks a live line with the phase's age: %q", errs)
		}
		if !strings.HasSuffix(errs, "\r\x1b[2K") {
			t.Errorf("the live line is not cleared at the end: %q", errs[max(0, len(errs)-40):])
		}
		if stdout.String() != "Four.\n\nCaveats: none raised by the catalog.\n" {
			t.Errorf("stdout %q", stdout.String())
		}
	})
}

// Without a terminal, progress is plain lines only: no control sequences, and a milestone that
// says the same as the one before is not repeated.
func TestPlainProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()})
		var stdout, stderr bytes.Buffer
		again := frameOf(3, "milestone", `,"phase":"grounding","subject":"incident","source":"demo"`)
		svc.Send(fAccepted, fMilestone, again, frameOf(4, "answer", `,"text":"Four.","caveats":[],"path":{"speed":"full","detail":"warehouse"},"provenance":[],"sql":[],"divergence":null`),
			frameOf(5, "done", `,"outcome":"answer","steps":0,"model_calls":1,"input_tokens":1,"output_tokens":1,"elapsed_ms":1`))
		if code := runWith(t.Context(), []string{"--token", "t", "q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc}); code != exitAnswer {
			t.Fatalf("exit %d", code)
		}
		if got := stderr.String(); got != "Looking up 'incident' in the catalog…\n" {
			t.Errorf("stderr %q, want the one milestone line (the repeat folded into it)", got)
		}
	})
}

// When the service never confirms a cancel, ask leaves after the grace with status 4, having
// sent exactly one cancel.
func TestCtrlCGraceWhenNotConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()})
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		var stdout, stderr bytes.Buffer
		done := make(chan int)
		start := time.Now()
		go func() {
			done <- runWith(ctx, []string{"--token", "t", "q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc})
		}()
		svc.Send(fAccepted, fMilestone)
		synctest.Wait()
		interrupt()
		code := <-done
		if code != exitError || svc.Cancels() != 1 {
			t.Fatalf("exit %d after %d cancels, want 4 after exactly 1", code, svc.Cancels())
		}
		if waited := time.Since(start); waited != cancelGrace {
			t.Errorf("left after %v, want the grace of %v", waited, cancelGrace)
		}
		if !strings.Contains(stderr.String(), "did not confirm") {
			t.Errorf("stderr %q", stderr.String())
		}
	})
}

// A cancel the service never answers counts against the same grace: Ctrl-C leaves within it,
// saying the ticket may still be running.
func TestCtrlCGraceWhenCancelHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		svc.hangCancel = true
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()})
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		var stdout, stderr bytes.Buffer
		done := make(chan int)
		go func() {
			done <- runWith(ctx, []string{"--token", "t", "q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc})
		}()
		svc.Send(fAccepted, fMilestone)
		synctest.Wait()
		start := time.Now()
		interrupt()
		code := <-done
		if code != exitError || svc.Cancels() != 1 {
			t.Fatalf("exit %d after %d cancels, want 4 after exactly 1", code, svc.Cancels())
		}
		if waited := time.Since(start); waited != cancelGrace {
			t.Errorf("left %v after Ctrl-C, want the grace of %v in all", waited, cancelGrace)
		}
		if got := stderr.String(); !strings.Contains(got, "could not be cancelled and may still be running") || strings.Contains(got, "ask: ask") {
			t.Errorf("stderr %q", got)
		}
	})
}

// Ctrl-C while the service has not yet answered the ask: the ask may have been made, so its
// reply is awaited, but for the same grace only, and the wait is said at once. Ctrl-C ends in
// status 4 and says the ask may exist, never a 30 s silence then "did not answer in time".
func TestCtrlCGraceWhenAskHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		svc.hangAsk = true
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "XDG_STATE_HOME": t.TempDir()})
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		var stdout bytes.Buffer
		stderr := &watchWriter{want: "\n", seen: make(chan struct{})}
		done := make(chan int)
		go func() {
			done <- runWith(ctx, []string{"--token", "t", "q"}, nil, &stdout, stderr, env, &http.Client{Transport: svc})
		}()
		synctest.Wait() // the ask is sent, and hangs
		start := time.Now()
		interrupt()
		synctest.Wait()
		if got := stderr.String(); !strings.HasPrefix(got, "Cancelling…") {
			t.Errorf("right after Ctrl-C, stderr %q; want Cancelling… said at once", got)
		}
		code := <-done
		if waited := time.Since(start); waited != cancelGrace {
			t.Errorf("left %v after Ctrl-C, want the grace of %v", waited, cancelGrace)
		}
		if got := stderr.String(); code != exitError || !strings.Contains(got, "ask: interrupted; the service did not answer the ask within 5s: it may have been made") {
			t.Errorf("exit %d, stderr %q; want 4 and that the ask may have been made", code, got)
		}
		if stdout.String() != "" || svc.Cancels() != 0 {
			t.Errorf("stdout %q, %d cancels; want nothing (no ticket to cancel)", stdout.String(), svc.Cancels())
		}
	})
}

// A dev identity provider that never answers is said within mintTimeout, not waited on for
// ever in silence.
func TestTokenMintTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		svc.hangToken = true
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "ASK_IDP": "http://idp.test", "XDG_STATE_HOME": t.TempDir()})
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := runWith(t.Context(), []string{"q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc})
		if waited := time.Since(start); waited != mintTimeout {
			t.Errorf("left after %v, want %v", waited, mintTimeout)
		}
		if got := stderr.String(); code != exitFailure || !strings.Contains(got, "ask: no token") || !strings.Contains(got, "the dev identity provider at http://idp.test did not answer within 10s") {
			t.Errorf("exit %d, stderr %q", code, got)
		}
	})
}

// The live line never wraps: on a terminal of 80 columns (what a writer that is no terminal
// counts as), a phase too long for it is cut with "…", whole lines above it are not. Ctrl-C's
// line, which names the ticket twice, is the longest the command writes.
func TestSpinnerLineFitsTheTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := newFakeService()
		env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "ASK_PROGRESS": "tty", "XDG_STATE_HOME": t.TempDir()})
		ctx, interrupt := context.WithCancel(t.Context())
		defer interrupt()
		var stdout, stderr bytes.Buffer
		done := make(chan int)
		go func() {
			done <- runWith(ctx, []string{"--token", "t", "q"}, nil, &stdout, &stderr, env, &http.Client{Transport: svc})
		}()
		long := strings.Repeat("incident ", 20)
		svc.Send(fAccepted, frameOf(2, "milestone", `,"phase":"grounding","subject":"`+long+`","source":"demo"`))
		time.Sleep(time.Second)
		interrupt()
		time.Sleep(time.Second)
		svc.Send(frameOf(3, "error", `,"kind":"cancelled","message":"cancelled"`), frameOf(4, "done", `,"outcome":"error","steps":0,"model_calls":0,"input_tokens":0,"output_tokens":0,"elapsed_ms":1`))
		if code := <-done; code != exitError {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
		var live int
		for _, seg := range strings.Split(stderr.String(), "\r\x1b[2K") {
			if seg == "" || strings.HasSuffix(seg, "\n") {
				continue // a whole line, which the terminal may wrap: it is never redrawn
			}
			live++
			if n := len([]rune(seg)); n > 79 {
				t.Errorf("a live line of %d columns, want at most 79: %q", n, seg)
			}
		}
		if live == 0 || !strings.Contains(stderr.String(), "Looking up '"+strings.TrimSpace(long)+"' in the catalog…\n") || !strings.Contains(stderr.String(), "Cancelling ticket tk… (Ctrl-C again") {
			t.Errorf("stderr %q, want the whole lines and a live line", stderr.String())
		}
	})
}
