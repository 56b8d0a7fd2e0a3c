package server_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// TestUnansweredCompleteAfterTakeoverRunsNothing: a keyed ask stalled past its lock while a
// retry took the record over and ran its own ticket; when the stalled attempt's completion of
// the record then goes unanswered (the store away), it does not know whether the key is still
// its own, and must not run its ticket. Until 2026-12-07 it answered its own 202 and ran it: one
// key, two tickets answered and two asks run (reproduced with a real redis-server behind
// faultproxy: the stalled replica's CreateTicket held past the lock, the reply to its
// CompleteIdempotent lost, its link stalled until the create's bound).
func TestUnansweredCompleteAfterTakeoverRunsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
		h := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs)})
		cid := h.conv(alice)
		const q = "How many sev1 incidents did we have in 2026-Q2?"

		release, stalled := g.stallKeyedAsk(h, cid, "k", q)
		retry := h.keyedAsk(alice, cid, "k", q)
		if retry.StatusCode() != http.StatusAccepted {
			t.Fatalf("the retry: %d %s", retry.StatusCode(), retry.Body)
		}
		h.events(alice, retry.JSON202.Ticket)

		g.mu.Lock()
		g.loseComplete = true
		g.mu.Unlock()
		release() // the stalled attempt's ticket is made now; its completion goes unanswered
		first := <-stalled
		synctest.Wait()
		if first.StatusCode() == http.StatusAccepted && first.JSON202.Ticket != retry.JSON202.Ticket {
			t.Errorf("one key answered two tickets: %s to the stalled attempt, %s to the retry", first.JSON202.Ticket, retry.JSON202.Ticket)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs under one key, want 1", n)
		}
		again := h.keyedAsk(alice, cid, "k", q)
		if again.StatusCode() != http.StatusAccepted || again.JSON202.Ticket != retry.JSON202.Ticket {
			t.Errorf("a later retry: %d %s, want the retry's ticket %s", again.StatusCode(), again.Body, retry.JSON202.Ticket)
		}
	})
}

// TestUnansweredCompleteRunsOnceTheKeyIsKnown: a keyed ask whose completion of its own record
// goes unanswered is answered 503 (retry), not its 202, and runs once the store answers that
// the key is its own; the retry is answered its ticket, and one ask runs.
func TestUnansweredCompleteRunsOnceTheKeyIsKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), loseComplete: true}
		h := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs)})
		cid := h.conv(alice)
		const q = "How many sev1 incidents did we have in 2026-Q2?"
		first := h.keyedAsk(alice, cid, "k", q)
		problemOf(t, first.StatusCode(), first.HTTPResponse.Header.Get("Content-Type"), first.Body, http.StatusServiceUnavailable)
		synctest.Wait()
		retry := h.keyedAsk(alice, cid, "k", q)
		if retry.StatusCode() != http.StatusAccepted || retry.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the retry: %d %s, want the recorded 202", retry.StatusCode(), retry.Body)
		}
		frames := h.events(alice, retry.JSON202.Ticket)
		if last := frames[len(frames)-2]; last.Event != "answer" {
			t.Errorf("the ask ended %q, want answer", last.Event)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs, want 1", n)
		}
	})
}

// TestTakenOverConversationAnswersTheRecord: a keyed createConversation stalled past its lock
// while a retry took the record over and made its own conversation; the stalled attempt, coming
// back, finds the record another's and answers that (409, retry: the record's 201), never its own
// conversation, which the key does not name. Until 2026-12-07 it answered its own 201, and one
// key gave its caller two conversations. So for an unanswered completion: 503, not its 201.
func TestTakenOverConversationAnswersTheRecord(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("completion answered %v", !lose), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
				h := newHarness(t, server.Options{Store: g})
				release, stalled := stallAt(g, &g.holdConv, func() *gen.CreateConversationResponse { return h.keyedConv(alice, "k") })
				retry := h.keyedConv(alice, "k")
				if retry.StatusCode() != http.StatusCreated {
					t.Fatalf("the retry: %d %s", retry.StatusCode(), retry.Body)
				}
				g.mu.Lock()
				g.loseComplete = lose
				g.mu.Unlock()
				release()
				first := <-stalled
				synctest.Wait()
				if first.StatusCode() == http.StatusCreated && first.JSON201.Id != retry.JSON201.Id {
					t.Errorf("one key answered two conversations: %s to the stalled attempt, %s to the retry", first.JSON201.Id, retry.JSON201.Id)
				}
				if first.StatusCode() != http.StatusCreated && first.HTTPResponse.Header.Get("Retry-After") == "" {
					t.Errorf("the stalled attempt: %d without Retry-After: %s", first.StatusCode(), first.Body)
				}
				again := h.keyedConv(alice, "k")
				if again.StatusCode() != http.StatusCreated || again.JSON201.Id != retry.JSON201.Id {
					t.Errorf("a later retry: %d %s, want %s", again.StatusCode(), again.Body, retry.JSON201.Id)
				}
			})
		})
	}
}

// TestTakeoverDoesNotAnswerAnAskGivenUp: a keyed ask (A) made its ticket and stalled past its
// lock before completing the record; a retry (B) took the record over, found A's ticket and was
// about to answer it when A came back first, found the key taken over and ended its ticket
// unrun. B then makes its own ticket, which runs and which the key answers from then on. Until
// 2026-12-07 B completed the record with A's ticket all the same: the key answered, for good, an
// ask that never ran, error{cancelled} (an independent driver, two replicas sharing Redis, one
// frozen with SIGSTOP at its create).
func TestTakeoverDoesNotAnswerAnAskGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
		h := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs)})
		cid := h.conv(alice)
		const q = "How many sev1 incidents did we have in 2026-Q2?"

		// A: its ticket made, held at its completion of the record past its lock; B: takes the
		// record over, finds A's ticket, and is held at completing it with that.
		releaseA, stalledA, releaseB, outB := stallThenTakeOver(g, func() *gen.CreateAskResponse { return h.keyedAsk(alice, cid, "k", q) })

		releaseA()
		a := <-stalledA
		synctest.Wait()
		if a.StatusCode() == http.StatusAccepted {
			t.Fatalf("A, taken over: 202 %s, want it to give its ticket up", a.Body)
		}
		releaseB()
		b := <-outB
		if b.StatusCode() != http.StatusAccepted {
			t.Fatalf("B: %d %s, want 202", b.StatusCode(), b.Body)
		}
		frames := h.events(alice, b.JSON202.Ticket)
		if last := frames[len(frames)-2]; last.Event != "answer" {
			t.Errorf("the ticket the key answers ended %q (%s), want answer: it was given up unrun", last.Event, last.Data)
		}
		synctest.Wait()
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs under one key, want 1", n)
		}
		again := h.keyedAsk(alice, cid, "k", q)
		if again.StatusCode() != http.StatusAccepted || again.JSON202.Ticket != b.JSON202.Ticket {
			t.Errorf("a later retry: %d %s, want B's ticket %s", again.StatusCode(), again.Body, b.JSON202.Ticket)
		}
	})
}

// TestTakeoverOfAConversationLeavesNoneBehind: a keyed createConversation (A) made its
// conversation and stalled past its lock before completing the record; a retry (B) took the
// record over, found A's conversation and was about to answer it when A came back first and
// found the key taken over. B then makes its own conversation, which the key answers from then
// on, and A's, which nobody will be answered, is removed: at one conversation per identity, B
// is answered 201, not 429. Until 2026-12-07 A's empty conversation stayed until its TTL,
// counted against its owner's cap (a review of the fix that made B make its own).
func TestTakeoverOfAConversationLeavesNoneBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
		h := newHarness(t, server.Options{Store: g, MaxConversationsPerID: 1})

		// A: its conversation made, held at its completion of the record past its lock; B:
		// takes the record over, finds A's conversation, and is held at completing it with that.
		releaseA, stalledA, releaseB, outB := stallThenTakeOver(g, func() *gen.CreateConversationResponse { return h.keyedConv(alice, "k") })

		releaseA()
		a := <-stalledA
		synctest.Wait()
		if a.StatusCode() == http.StatusCreated {
			t.Fatalf("A, taken over: 201 %s, want the record's answer to come from B", a.Body)
		}
		releaseB()
		b := <-outB
		if b.StatusCode() != http.StatusCreated {
			t.Fatalf("B: %d %s, want 201 (A's conversation, which nobody holds, still counted?)", b.StatusCode(), b.Body)
		}
		again := h.keyedConv(alice, "k")
		if again.StatusCode() != http.StatusCreated || again.JSON201.Id != b.JSON201.Id {
			t.Errorf("a later retry: %d %s, want B's conversation %s", again.StatusCode(), again.Body, b.JSON201.Id)
		}
		if _, _, err := g.Conversation(t.Context(), b.JSON201.Id); err != nil {
			t.Errorf("B's conversation: %v", err)
		}
	})
}

// TestTakeoverAnsweringTheStalledConversationKeepsIt: the other order of
// TestTakeoverOfAConversationLeavesNoneBehind. The takeover (B) completes the record with the
// stalled attempt's (A's) conversation before A comes back: B is answered it, and A, finding
// the record done with its own conversation, is answered it too (or 503 when its completion's
// reply is lost); either way the conversation is the key's and stays, an ask is made in it.
func TestTakeoverAnsweringTheStalledConversationKeepsIt(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("completion answered %v", !lose), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
				h := newHarness(t, server.Options{Store: g})
				releaseA, stalledA := stallAt(g, &g.holdComplete, func() *gen.CreateConversationResponse { return h.keyedConv(alice, "k") })
				b := h.keyedConv(alice, "k")
				if b.StatusCode() != http.StatusCreated {
					t.Fatalf("B: %d %s, want 201", b.StatusCode(), b.Body)
				}
				g.mu.Lock()
				g.loseComplete = lose
				g.mu.Unlock()
				releaseA()
				a := <-stalledA
				synctest.Wait()
				switch {
				case lose && a.StatusCode() != http.StatusServiceUnavailable:
					t.Errorf("A, its completion's reply lost: %d %s, want 503", a.StatusCode(), a.Body)
				case !lose && (a.StatusCode() != http.StatusCreated || a.JSON201.Id != b.JSON201.Id):
					t.Errorf("A: %d %s, want 201 with B's conversation %s", a.StatusCode(), a.Body, b.JSON201.Id)
				}
				if _, _, err := g.Conversation(t.Context(), b.JSON201.Id); err != nil {
					t.Fatalf("the key's conversation: %v, want it kept", err)
				}
				h.ask(alice, b.JSON201.Id, "How many sev1 incidents did we have in 2026-Q2?")
			})
		})
	}
}

// stallThenTakeOver calls call twice, with one key: the first call (A) is held at its
// completion of the record past its lock (stallAt), and the second (B) takes the record over
// and is held at its own completion. releaseA lets A complete, releaseB lets B; each one's
// answer comes on its channel.
func stallThenTakeOver[T any](g *gatedStore, call func() T) (releaseA func(), outA <-chan T, releaseB func(), outB <-chan T) {
	releaseA, outA = stallAt(g, &g.holdComplete, call)
	holdB := make(chan struct{})
	g.mu.Lock()
	g.reachedCreate = make(chan struct{}) // A's wait closed the first
	reachedB := g.reachedCreate
	g.holdComplete = holdB
	g.mu.Unlock()
	b := make(chan T, 1)
	go func() { b <- call() }()
	<-reachedB
	return releaseA, outA, func() { close(holdB) }, b
}
