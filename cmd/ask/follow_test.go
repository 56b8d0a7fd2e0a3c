package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// ticketOf asks question with --json and returns its ticket, read from the accepted event.
func (f *fixture) ticketOf(t *testing.T, env func(string) (string, bool), question string, want int) string {
	t.Helper()
	code, stdout, stderr := f.run(t.Context(), env, "--json", question)
	if code != want {
		t.Fatalf("%s: exit %d, want %d\n%s", question, code, want, stderr)
	}
	var ev struct {
		Ticket string `json:"ticket"`
	}
	first, _, _ := strings.Cut(stdout, "\n")
	if err := json.Unmarshal([]byte(first), &ev); err != nil || ev.Ticket == "" {
		t.Fatalf("no ticket in the first line %q (%v)", first, err)
	}
	return ev.Ticket
}

// slowAsk makes alice's ask "slow", which runs until it is cancelled, once it runs: her token,
// a client with it, and the ticket.
func (f *fixture) slowAsk(t *testing.T) (string, *client.Client, gen.Ticket) {
	t.Helper()
	tok := f.idp.Token(t, "alice")
	c, err := client.New(f.url, client.Options{Token: client.StaticToken(tok)})
	if err != nil {
		t.Fatal(err)
	}
	cv, err := c.CreateConversation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.Ask(t.Context(), cv.Id, "slow")
	if err != nil {
		t.Fatal(err)
	}
	<-f.runner.waiting
	return tok, c, tk
}

// --follow prints an ask made earlier as the ask itself did, with the same exit status; a
// ticket that is not the caller's, or none at all, is one clear line and exit 1, never a raw
// error of the client library.
func TestRunFollow(t *testing.T) {
	f := start(t)
	env := f.env(t)
	for _, tc := range []struct {
		question string
		code     int
		stdout   string
	}{
		{"answer", exitAnswer, "Payments had the most incidents."},
		{"refuse", exitRefusal, "Refused by demo (run_query)"},
		{"abstain", exitAbstention, "No answer: the catalog has nothing for: churn"},
		{"fail", exitError, "The run failed (model)"},
	} {
		tk := f.ticketOf(t, env, tc.question, tc.code)
		code, stdout, stderr := f.run(t.Context(), env, "--follow", tk)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) {
			t.Errorf("--follow %s (%s): exit %d, stdout %q, stderr %q; want %d and %q", tk, tc.question, code, stdout, stderr, tc.code, tc.stdout)
		}
		if code, stdout, _ := f.run(t.Context(), env, "--json", "--follow", tk); code != tc.code || !strings.HasPrefix(stdout, `{"seq":1,`) || !strings.Contains(stdout[strings.LastIndex(strings.TrimSpace(stdout), "\n")+1:], `"type":"done"`) {
			t.Errorf("--json --follow %s: exit %d, stdout %q", tk, code, stdout)
		}
	}
	tk := f.ticketOf(t, env, "answer", exitAnswer)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"another identity's", []string{"--as", "bob", "--follow", tk}, "holds no ticket " + tk + " for this identity"},
		{"unknown", []string{"--follow", "t_NOSUCHTICKET"}, "holds no ticket t_NOSUCHTICKET for this identity"},
	} {
		code, stdout, stderr := f.run(t.Context(), env, tc.args...)
		if code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, "ask: ") || !strings.Contains(stderr, tc.stderr) ||
			strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "streamEvents") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1 and one line saying %q", tc.name, code, stdout, stderr, tc.stderr)
		}
	}
	// A bearer the service refuses: which setting to change, and not "lost" a stream never had.
	code, stdout, stderr := f.run(t.Context(), env, "--token", "forged.token.value", "--follow", tk)
	if want := "ask: could not follow ticket " + tk + ": the service refused the request: 401 Unauthorized"; code != exitFailure || stdout != "" ||
		!strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "--token or $ASK_TOKEN was refused") || strings.Contains(stderr, "forged.token.value") {
		t.Errorf("a refused --token: exit %d, stdout %q, stderr %q; want 1 and %q… naming the setting", code, stdout, stderr, want)
	}
	if n := f.cancels.Load(); n != 0 {
		t.Errorf("%d cancels sent, want none", n)
	}
}

func TestRunFollowUsage(t *testing.T) {
	f := start(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--follow", ""}, "ask: --follow needs a ticket"},
		{[]string{"--follow", "t_X", "a", "question"}, "ask: --follow names a ticket and asks nothing"},
		{[]string{"--follow", "t_X", "-q", "a question"}, "ask: --follow names a ticket and asks nothing"},
		{[]string{"--follow", "t_X", "--continue"}, "ask: --continue and --webhook are for a new ask"},
		// A question typed where the ticket goes is not echoed, nor sent.
		{[]string{"--follow", "How many sev1 incidents did we have?"}, "ask: --follow needs a ticket, such as t_T5ULAGSQ7BZLGTARGIZHRSL33G; what was given is not one"},
		{[]string{"--follow", "t_" + strings.Repeat("A", 63)}, "ask: --follow needs a ticket, such as t_T5ULAGSQ7BZLGTARGIZHRSL33G; what was given is not one"},
		{[]string{"--follow", "t_X", "--webhook", "http://127.0.0.1:1/"}, "ask: --continue and --webhook are for a new ask"},
	} {
		if code, stdout, stderr := f.run(t.Context(), f.env(t), tc.args...); code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, tc.stderr) || strings.Contains(stderr, "sev1") {
			t.Errorf("ask %q: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, stdout, stderr, tc.stderr)
		}
	}
}

// Ctrl-C while following watches no more and cancels nothing: the run may be another
// terminal's. The ticket is named so that it can be followed again.
func TestRunFollowCtrlCLeavesTheRun(t *testing.T) {
	f := start(t)
	tok, c, tk := f.slowAsk(t)
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	// Ctrl-C once the follower has shown the run's progress: it is following.
	stderr := &watchWriter{want: "Looking up 'incident'", seen: make(chan struct{})}
	go func() {
		select {
		case <-stderr.seen:
			interrupt()
		case <-t.Context().Done():
		}
	}()
	var stdout bytes.Buffer
	code := run(ctx, []string{"--token", tok, "--follow", tk.Ticket}, strings.NewReader(""), &stdout, stderr, f.env(t))
	if code != exitInterrupted || stdout.String() != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %d and nothing on stdout", code, stdout.String(), stderr.String(), exitInterrupted)
	}
	if want := "ask: stopped following ticket " + tk.Ticket + "; the run goes on (ask --follow " + tk.Ticket; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if n := f.cancels.Load(); n != 0 {
		t.Errorf("%d cancels sent, want none", n)
	}
	st, err := c.Status(t.Context(), tk.Ticket, 0)
	if err != nil || st.State != "running" {
		t.Errorf("the run is %q (%v), want still running", st.State, err)
	}
	if _, err := c.Cancel(t.Context(), tk.Ticket); err != nil {
		t.Fatal(err)
	}
}

// A stream lost for a reason a retry may cure names the ticket and how to follow it again; one
// the service does not hold says why it may be gone, without the client library's wording.
func TestStreamLostWording(t *testing.T) {
	cfg := &config{url: "http://127.0.0.1:1/ask", shown: "http://127.0.0.1:1/ask"}
	lost := streamLost("t_A", &url.Error{Op: "Get", URL: "http://127.0.0.1:1/ask/v1/asks/t_A/events", Err: errors.New("connection reset by peer")}, true, cfg)
	if !strings.Contains(lost, "lost the event stream of ticket t_A: cannot reach the ask service") || !strings.HasSuffix(lost, "(ask --follow t_A tries again)") {
		t.Errorf("lost: %q", lost)
	}
	gone := streamLost("t_A", &client.APIError{Op: "streamEvents", StatusCode: 404}, true, cfg)
	if !strings.Contains(gone, "holds no ticket t_A") || strings.Contains(gone, "streamEvents") {
		t.Errorf("gone: %q", gone)
	}
	// A gateway's 503 until the reconnects ran out: the run may go on, and the line said
	// neither so nor how to follow it again (a real 503 + Retry-After: 1 for every reconnect
	// ended with "could not follow ticket …: 503 Service Unavailable (try again in 1s)").
	for _, st := range []int{503, 502, 429} {
		refused := fmt.Errorf("client: event stream for ticket t_A: no progress after 10 reconnects: %w", &client.APIError{Op: "streamEvents", StatusCode: st, RetryAfter: time.Second})
		if got := streamLost("t_A", refused, false, cfg); !strings.Contains(got, fmt.Sprintf("could not follow ticket t_A: the service refused the request: %d", st)) || !strings.HasSuffix(got, "(ask --follow t_A tries again)") {
			t.Errorf("%d until the reconnects ran out: %q", st, got)
		}
	}
	if got := streamLost("t_A", &client.APIError{Op: "streamEvents", StatusCode: 401}, true, cfg); strings.Contains(got, "tries again") {
		t.Errorf("401: %q, which another try does not cure", got)
	}
}

// watchWriter is a buffer that closes seen once what was written contains want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// --cancel sends one cancel for an ask made earlier and prints how it ended: cancelled (exit 4)
// for a running one; for one that had ended, the outcome it had, unchanged. A ticket that is not
// the caller's is one line and exit 1, and nothing is cancelled.
func TestRunCancelTicket(t *testing.T) {
	f := start(t)
	env := f.env(t)
	_, c, slow := f.slowAsk(t)

	// Another identity's ticket: not found, and the run goes on.
	code, stdout, stderr := f.run(t.Context(), env, "--as", "bob", "--cancel", slow.Ticket)
	if code != exitFailure || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "holds no ticket "+slow.Ticket+" for this identity") {
		t.Errorf("bob's --cancel: exit %d, stdout %q, stderr %q; want 1 and one line saying it holds no such ticket", code, stdout, stderr)
	}
	if st, err := c.Status(t.Context(), slow.Ticket, 0); err != nil || st.State != gen.AskStateRunning {
		t.Fatalf("after bob's --cancel the ticket is %+v (%v), want running", st, err)
	}

	before := f.cancels.Load()
	code, stdout, stderr = f.run(t.Context(), env, "--cancel", slow.Ticket)
	if code != exitError || stdout != "Cancelled.\n" || !strings.Contains(stderr, "Sent the cancel of ticket "+slow.Ticket) {
		t.Errorf("--cancel of a running ask: exit %d, stdout %q, stderr %q; want 4, Cancelled. and the ticket named", code, stdout, stderr)
	}
	if n := f.cancels.Load() - before; n != 1 {
		t.Errorf("--cancel sent %d cancels, want 1", n)
	}

	done := f.ticketOf(t, env, "answer", exitAnswer)
	code, stdout, stderr = f.run(t.Context(), env, "--cancel", done)
	if code != exitAnswer || !strings.Contains(stdout, "Payments had the most incidents.") || !strings.Contains(stderr, "had already ended (answer)") {
		t.Errorf("--cancel of an answered ask: exit %d, stdout %q, stderr %q; want 0, the answer, and that it had ended", code, stdout, stderr)
	}
	code, stdout, stderr = f.run(t.Context(), env, "--json", "--cancel", done)
	if code != exitAnswer || !strings.HasPrefix(stdout, `{"seq":1,`) {
		t.Errorf("--json --cancel: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestRunCancelUsage(t *testing.T) {
	f := start(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--cancel", ""}, "ask: --cancel needs a ticket"},
		{[]string{"--cancel", "t_X", "a", "question"}, "ask: --cancel names a ticket and asks nothing"},
		{[]string{"--cancel", "t_X", "--continue"}, "ask: --continue and --webhook are for a new ask, not for --cancel"},
		{[]string{"--cancel", "t_X", "--follow", "t_X"}, "ask: give --follow or --cancel, not both"},
		{[]string{"--cancel", "How many sev1 incidents did we have?"}, "ask: --cancel needs a ticket, such as t_T5ULAGSQ7BZLGTARGIZHRSL33G; what was given is not one"},
	} {
		if code, stdout, stderr := f.run(t.Context(), f.env(t), tc.args...); code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, tc.stderr) || strings.Contains(stderr, "sev1") {
			t.Errorf("ask %q: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, stdout, stderr, tc.stderr)
		}
	}
	if n := f.cancels.Load(); n != 0 {
		t.Errorf("%d cancels sent, want none", n)
	}
}
