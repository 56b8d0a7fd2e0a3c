package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// follow reads the ticket's events to done, rendering as it goes, and returns the exit status.
// For an ask this command made, Ctrl-C (ctx ending) cancels the run; with --follow it only
// stops watching.
func follow(ctx context.Context, c *client.Client, tk gen.Ticket, cfg *config, stdout, stderr io.Writer) int {
	// The stream outlives ctx: after Ctrl-C it keeps reading until the run confirms the
	// cancel with error{cancelled} and done, or the grace runs out.
	// The terminal check must see the real stderr (an *os.File), so it comes before the wrap:
	// progress, the cancel notice and the final words then share stderr from two goroutines.
	tty := !cfg.json && wantSpinner(stdout, stderr, cfg.env)
	term := stderr
	stderr = &syncWriter{w: stderr}
	var prog progress = &plainProgress{w: stderr}
	if tty {
		prog = newSpinner(stderr, "Thinking…", func() int { return widthOf(term) })
	}
	streamCtx, stopStream := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStream()
	finished := make(chan struct{})
	var wg sync.WaitGroup
	var interrupted, cancelRefused, detached bool
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-finished:
			return
		case <-ctx.Done():
		}
		select {
		case <-finished:
			// The stream ended first: ctx ending while the outcome is written (its reader gone,
			// ask Q | head -1) cancels nothing and stops nothing.
			return
		default:
		}
		if cfg.follow != "" {
			// Watching an ask made earlier, perhaps by another terminal: leave it running.
			mu.Lock()
			detached = true
			mu.Unlock()
			stopStream()
			return
		}
		mu.Lock()
		interrupted = true
		mu.Unlock()
		// The ticket is named so that a second Ctrl-C, which leaves at once, leaves it findable.
		prog.Line(fmt.Sprintf("Cancelling ticket %s… (Ctrl-C again leaves at once; ask --follow %s shows how it ended)", tk.Ticket, tk.Ticket))
		// One grace for both the cancel request and the run's confirmation: Ctrl-C leaves
		// within cancelGrace however the service is doing.
		deadline := time.Now().Add(cancelGrace)
		cancelCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		if _, err := c.Cancel(cancelCtx, tk.Ticket); err != nil {
			mu.Lock()
			cancelRefused = true
			mu.Unlock()
			prog.Line("ask: the service did not take the cancel: " + describe(err, cfg.shown))
		}
		grace := time.NewTimer(time.Until(deadline))
		defer grace.Stop()
		select {
		case <-finished:
		case <-grace.C:
			stopStream()
		}
	}()
	defer wg.Wait()

	var out client.Outcome
	var streamErr error
	sawDone, gotAny := false, false
	lastMilestone := ""
	branches := &branchView{expand: cfg.branches || cfg.steps}
	for ev, err := range c.Events(streamCtx, tk.Ticket, client.EventsOptions{}) {
		if err != nil {
			streamErr = err
			break
		}
		gotAny = true
		if cfg.json {
			writeLine(stdout, ev.Data)
		}
		switch v := ev.Value.(type) {
		case gen.AcceptedEvent:
			if cfg.steps && !cfg.json {
				prog.Line(fmt.Sprintf("Asked; ticket %s.", v.Ticket))
			}
		case gen.BranchEvent:
			if line := branches.open(v); line != "" && !cfg.json {
				prog.Line(line)
			}
		case gen.MilestoneEvent:
			// Two tools in one phase on one subject read as one thing to a person.
			if line, show := branches.milestone(v); show && line != lastMilestone && !cfg.json {
				prog.Line(line)
				lastMilestone = line
			}
		case gen.StepEvent:
			if cfg.steps && !cfg.json {
				prog.Line(branches.step(v))
			}
		case gen.AnswerEvent:
			out.Kind, out.Answer = client.Answer, &v
		case gen.AbstentionEvent:
			out.Kind, out.Abstention = client.Abstention, &v
		case gen.RefusalEvent:
			out.Kind, out.Refusal = client.Refusal, &v
		case gen.ErrorEvent:
			out.Kind, out.Error = client.Error, &v
		case gen.DoneEvent:
			out.Done, out.MissedSteps, sawDone = v, ev.MissedSteps, true
		}
	}
	close(finished)
	prog.Stop()

	mu.Lock()
	wasInterrupted, wasRefused, wasDetached := interrupted, cancelRefused, detached
	mu.Unlock()
	if !sawDone || out.Kind == client.NotTerminal {
		switch {
		case wasDetached:
			fmt.Fprintf(stderr, "ask: stopped following ticket %s; the run goes on (ask --follow %s follows it again)\n", tk.Ticket, tk.Ticket)
			return exitInterrupted
		case wasInterrupted && wasRefused:
			fmt.Fprintf(stderr, "ask: interrupted; ticket %s could not be cancelled and may still be running (ask --follow %s shows how it ends)\n", tk.Ticket, tk.Ticket)
			return exitError
		case wasInterrupted:
			fmt.Fprintf(stderr, "ask: interrupted; the cancel of ticket %s was sent, but the run did not confirm it within %s\n", tk.Ticket, cancelGrace)
			return exitError
		}
		if streamErr == nil {
			streamErr = client.ErrIncomplete
		}
		fmt.Fprintf(stderr, "ask: %s\n", text(streamLost(tk.Ticket, streamErr, gotAny, cfg)))
		return exitFailure
	}
	if cfg.steps && out.MissedSteps > 0 {
		fmt.Fprintf(stderr, "(%d of %d tool calls are not shown: the service no longer held them)\n", out.MissedSteps, out.Done.Steps)
	}
	if cfg.json {
		// stdout holds the events only; the sentence for a failed run goes beside them.
		if out.Kind == client.Error {
			fmt.Fprintln(stderr, text(errorSentence(out.Error)))
		}
		return exitCode(out.Kind)
	}
	// Every outcome of the run — a cancel or a timeout included — goes to stdout; stderr is for
	// progress and for the command's own failures (docs/decisions.md). What the service sent is
	// shown as text, never as a terminal's instructions (safe.go).
	stdout = textWriter{stdout}
	switch out.Kind {
	case client.Answer:
		renderAnswer(stdout, out.Answer, cfg.steps)
	case client.Abstention:
		renderAbstention(stdout, out.Abstention)
	case client.Refusal:
		renderRefusal(stdout, out.Refusal)
	case client.Error:
		fmt.Fprintln(stdout, errorSentence(out.Error))
	}
	return exitCode(out.Kind)
}

// writeLine writes one event as one line of JSON (NDJSON), compacting it should the service
// ever have spread it over several lines.
func writeLine(w io.Writer, data []byte) {
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		b.Reset()
		b.Write(bytes.ReplaceAll(data, []byte("\n"), []byte(" ")))
	}
	b.WriteByte('\n')
	_, _ = w.Write(b.Bytes())
}

// syncWriter serializes writes from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// noTicket words a 404 for ticket at the service at url.
func noTicket(url, ticket string) string {
	return fmt.Sprintf("the service at %s holds no ticket %s for this identity: it ended long enough ago to have expired, it belongs to another identity, was never made, or the service lost it (a restart without a shared store)", url, ticket)
}

// streamLost words why the events of ticket could not be followed to done (got: some were),
// and what to do.
func streamLost(ticket string, err error, got bool, cfg *config) string {
	lost := fmt.Sprintf("lost the event stream of ticket %s: ", ticket)
	if !got {
		lost = fmt.Sprintf("could not follow ticket %s: ", ticket)
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode == http.StatusNotFound {
			return noTicket(cfg.shown, ticket)
		}
		if !apiErr.Transient() {
			return lost + cfg.explain(err)
		}
		// A 503 or 429 until the reconnects were spent (a gateway or store outage): the run may
		// go on, as after a lost connection.
	}
	// An event stream that breaks the contract: following again reads the same events.
	if errors.Is(err, client.ErrProtocol) {
		return lost + cfg.explain(err)
	}
	// A connection that failed, or a service that stopped answering: the run may go on.
	return fmt.Sprintf("%s%s (ask --follow %s tries again)", lost, cfg.explain(err), ticket)
}

// cancelTicket is --cancel: one cancel of the ticket in cfg.follow (an ask made earlier, by this
// identity), then the ticket followed to done as --follow would, so that what is printed and the
// exit status are how the run ended: cancelled (error, 4), or the outcome it had reached before
// the cancel arrived. Ctrl-C while waiting stops watching (130); the cancel was sent.
func cancelTicket(ctx context.Context, c *client.Client, cfg *config, stdout, stderr io.Writer) int {
	acc, err := c.Cancel(ctx, cfg.follow)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "ask: interrupted; the cancel of ticket %s may not have been sent (ask --follow %s shows how it ends)\n", cfg.follow, cfg.follow)
			return exitInterrupted
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
			fmt.Fprintf(stderr, "ask: %s\n", noTicket(cfg.shown, cfg.follow))
			return exitFailure
		}
		fmt.Fprintf(stderr, "ask: could not cancel ticket %s: %s\n", cfg.follow, text(cfg.explain(err)))
		return exitFailure
	}
	// The reply's state is the ticket's after the cancel: running while the run winds down,
	// error once it has ended (by this cancel, or by an earlier failure: the outcome printed
	// says which), or the outcome it had reached before the cancel arrived, which a cancel
	// never changes.
	switch acc.State {
	case gen.AskStateAnswer, gen.AskStateAbstention, gen.AskStateRefusal:
		fmt.Fprintf(stderr, "Ticket %s had already ended (%s); the cancel changed nothing.\n", cfg.follow, acc.State)
	default:
		fmt.Fprintf(stderr, "Sent the cancel of ticket %s; how it ended:\n", cfg.follow)
	}
	return follow(ctx, c, gen.Ticket{Ticket: cfg.follow}, cfg, stdout, stderr)
}
