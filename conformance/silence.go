package conformance

import (
	"context"
	"fmt"
	"time"
)

// Silence is what one slow run's stream showed: whether it survived its silent model wait.
type Silence struct {
	// ReachedDone is set when the stream delivered done.
	ReachedDone bool
	// LongestGap is the longest time between two events (or the stream's start and its first).
	LongestGap time.Duration
	// LongestQuiet is the longest time nothing at all arrived, keep-alive comments included.
	LongestQuiet time.Duration
	// Comments counts the comment frames (keep-alives) received.
	Comments int
	// Ended says how the stream ended: "done", or why it ended before done.
	Ended string
}

// SilentWait asks cfg.Questions.Slow as identity A at cfg.BaseURL and follows the stream from
// the start to its end: the probe for a gateway's idle timeout. It returns an error only when
// cfg is unusable or the ask is not admitted.
func SilentWait(ctx context.Context, cfg Config) (Silence, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Silence{}, err
	}
	s, err := newSession(cfg)
	if err != nil {
		return Silence{}, err
	}
	conv, err := s.conversation(ctx, A)
	if err != nil {
		return Silence{}, err
	}
	r, err := s.ask(ctx, "slow", A, conv, cfg.Questions.Slow)
	if err != nil {
		return Silence{}, err
	}
	c := s.stream(ctx, A, r.ticket.Ticket, cursor{}, nil)
	out := Silence{Comments: len(c.Comments)}
	prevEvent, prevAny := r.admitted, r.admitted
	ci := 0
	for _, e := range c.Events {
		for ci < len(c.Comments) && c.Comments[ci].At.Before(e.At) {
			out.LongestQuiet = max(out.LongestQuiet, c.Comments[ci].At.Sub(prevAny))
			prevAny = c.Comments[ci].At
			ci++
		}
		out.LongestQuiet = max(out.LongestQuiet, e.At.Sub(prevAny))
		out.LongestGap = max(out.LongestGap, e.At.Sub(prevEvent))
		prevEvent, prevAny = e.At, e.At
	}
	_, out.ReachedDone = c.done()
	switch {
	case out.ReachedDone:
		out.Ended = "done"
	case c.Status != 200:
		out.Ended = fmt.Sprintf("status %d", c.Status)
	case c.Err != nil:
		out.Ended = "cut off: " + c.Err.Error()
	default:
		out.Ended = fmt.Sprintf("cut off after %s, at %s", time.Since(r.admitted).Round(100*time.Millisecond), typesOf(c.Events))
	}
	return out, nil
}
