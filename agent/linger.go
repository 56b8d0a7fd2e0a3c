package agent

import (
	"context"
	"sync"
	"time"
)

// DefaultHandshakeLinger is how long a handshake still pending when its run ends may go on
// when Options.HandshakeLinger is zero.
const DefaultHandshakeLinger = 5 * time.Second

// DefaultMaxLingeringHandshakes is how many handshakes with one source may linger at once,
// across the Agent, when Options.MaxLingeringHandshakes is zero.
const DefaultMaxLingeringHandshakes = 8

// lingerCut is why a handshake was cut short after its run ended, if it was.
type lingerCut int

const (
	notCut      lingerCut = iota
	cutCapFull            // every lingering slot of its source was taken when its run ended
	cutLingered           // it lingered as long as it may
)

// bound ends a handshake with source i (by cancel) soon after ctx, its run's, ends: it may
// linger for a.linger if one of the source's a.lingering slots is free then, else it ends at
// once. done must be called once the handshake has returned: it frees the slot, stops the
// timer, and tells whether (and why) the handshake was cut short. A handshake that returns
// before ctx ends takes no slot.
func (a *Agent) bound(ctx context.Context, i int, cancel context.CancelFunc) (done func() lingerCut) {
	var (
		mu       sync.Mutex
		returned bool // done was called: take no slot now
		held     bool // a slot of a.lingering[i]
		timer    *time.Timer
		cut      lingerCut
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return
		}
		select {
		case a.lingering[i] <- struct{}{}:
			held = true
			timer = time.AfterFunc(a.linger, func() {
				mu.Lock()
				if !returned {
					cut = cutLingered
				}
				mu.Unlock()
				cancel()
			})
		default:
			cut = cutCapFull
			cancel()
		}
	})
	return func() lingerCut {
		stop()
		mu.Lock()
		defer mu.Unlock()
		returned = true
		if timer != nil {
			timer.Stop()
		}
		if held {
			<-a.lingering[i]
		}
		return cut
	}
}
