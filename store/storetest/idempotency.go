package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/das-ask/ask/store"
)

// testIdempotency: the Idempotency-Key records (store.Idempotency's protocol). A lock of
// zero has lapsed at once and an hour's never does, so no test waits.
func testIdempotency(t *testing.T, f Factory) {
	ctx := t.Context()
	held := func(fp, cand string) store.IdemBegin {
		return store.IdemBegin{Fingerprint: fp, Candidate: cand, Lock: time.Hour, TTL: time.Hour}
	}
	begin := func(s store.Store, o store.Owner, key string, b store.IdemBegin) store.IdemResult {
		t.Helper()
		r, err := s.BeginIdempotent(ctx, o, key, b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := func(got store.IdemResult, state store.IdemState, id, prev string) {
		t.Helper()
		if got.State != state || got.ID != id || got.Prev != prev {
			t.Errorf("begin: %+v, want state %d id %q prev %q", got, state, id, prev)
		}
	}

	t.Run("NewDoneReplay", func(t *testing.T) {
		s := f(t, Options{})
		want(begin(s, Alice, "k1", held("fp", "a")), store.IdemNew, "a", "")
		// The same call again (its reply was lost): still this request's.
		want(begin(s, Alice, "k1", held("fp", "a")), store.IdemNew, "a", "")
		// Another request with the key while the first holds it.
		want(begin(s, Alice, "k1", held("fp", "b")), store.IdemBusy, "a", "")
		// Another body.
		want(begin(s, Alice, "k1", held("other", "c")), store.IdemMismatch, "", "")
		if err := s.CompleteIdempotent(ctx, Alice, "k1", "a", "a", []byte(`{"id":"a"}`)); err != nil {
			t.Fatal(err)
		}
		// Completing again (a lost reply) is fine.
		if err := s.CompleteIdempotent(ctx, Alice, "k1", "a", "a", []byte(`{"id":"a"}`)); err != nil {
			t.Fatal(err)
		}
		got := begin(s, Alice, "k1", held("fp", "d"))
		want(got, store.IdemDone, "a", "")
		if string(got.Response) != `{"id":"a"}` {
			t.Errorf("replayed response %q", got.Response)
		}
		want(begin(s, Alice, "k1", held("other", "e")), store.IdemMismatch, "", "")
		// Scoped to the owner: Bob's k1 is his own.
		want(begin(s, Bob, "k1", held("fp", "f")), store.IdemNew, "f", "")
		// Abandoning a completed record does nothing.
		if err := s.AbandonIdempotent(ctx, Alice, "k1", "a"); err != nil {
			t.Fatal(err)
		}
		want(begin(s, Alice, "k1", held("fp", "g")), store.IdemDone, "a", "")
	})

	t.Run("AbandonFreesTheKey", func(t *testing.T) {
		s := f(t, Options{})
		want(begin(s, Alice, "k2", held("fp", "a")), store.IdemNew, "a", "")
		// Only the holder may abandon.
		if err := s.AbandonIdempotent(ctx, Alice, "k2", "zzz"); err != nil {
			t.Fatal(err)
		}
		want(begin(s, Alice, "k2", held("fp", "b")), store.IdemBusy, "a", "")
		if err := s.AbandonIdempotent(ctx, Alice, "k2", "a"); err != nil {
			t.Fatal(err)
		}
		// A refused request leaves no record: the key may even carry another body now.
		want(begin(s, Alice, "k2", held("other", "c")), store.IdemNew, "c", "")
	})

	t.Run("ZeroTTLIsTheStoresOwn", func(t *testing.T) {
		// A record begun with no TTL lives the store's TTL (store.IdemBegin), as long as the
		// records of every other call: it is held, not gone at once with its key free for
		// another request to create a second resource under.
		s := f(t, Options{})
		noTTL := store.IdemBegin{Fingerprint: "fp", Candidate: "a", Lock: time.Hour}
		want(begin(s, Alice, "k4", noTTL), store.IdemNew, "a", "")
		want(begin(s, Alice, "k4", held("fp", "b")), store.IdemBusy, "a", "")
		if err := s.CompleteIdempotent(ctx, Alice, "k4", "a", "a", []byte("done")); err != nil {
			t.Fatal(err)
		}
		want(begin(s, Alice, "k4", held("fp", "c")), store.IdemDone, "a", "")
	})

	t.Run("TakeoverAfterTheLockLapses", func(t *testing.T) {
		s := f(t, Options{})
		lapsing := store.IdemBegin{Fingerprint: "fp", Candidate: "a", Lock: 0, TTL: time.Hour}
		want(begin(s, Alice, "k3", lapsing), store.IdemNew, "a", "")
		// The holder stalled past its lock: the next attempt takes over and learns what the
		// first may have created.
		want(begin(s, Alice, "k3", held("fp", "b")), store.IdemNew, "b", "a")
		// Its own retry still holds it.
		want(begin(s, Alice, "k3", held("fp", "b")), store.IdemNew, "b", "a")
		// The new holder answers what the first created.
		if err := s.CompleteIdempotent(ctx, Alice, "k3", "b", "a", []byte("first")); err != nil {
			t.Fatal(err)
		}
		// The stalled one comes back: its complete agrees with the record.
		if err := s.CompleteIdempotent(ctx, Alice, "k3", "a", "a", []byte("x")); err != nil {
			t.Errorf("complete agreeing with the record: %v", err)
		}
		got := begin(s, Alice, "k3", held("fp", "c"))
		want(got, store.IdemDone, "a", "")
		if string(got.Response) != "first" {
			t.Errorf("replayed %q, want the stored response", got.Response)
		}
	})

	t.Run("TakeoverDoesNotAnswerWhatWasUndone", func(t *testing.T) {
		s := f(t, Options{})
		lapsing := store.IdemBegin{Fingerprint: "fp", Candidate: "a", Lock: 0, TTL: time.Hour}
		want(begin(s, Alice, "k10", lapsing), store.IdemNew, "a", "")
		want(begin(s, Alice, "k10", held("fp", "b")), store.IdemNew, "b", "a")
		// The stalled one comes back before the new holder completes: it lost the record, and
		// undoes what it made.
		if err := s.CompleteIdempotent(ctx, Alice, "k10", "a", "a", []byte("x")); !errors.Is(err, store.ErrIdemLost) {
			t.Errorf("the stalled attempt's complete: %v, want ErrIdemLost", err)
		}
		// So the new holder may not answer it (an ask ended unrun, for good) ...
		if err := s.CompleteIdempotent(ctx, Alice, "k10", "b", "a", []byte("first")); !errors.Is(err, store.ErrIdemLost) {
			t.Errorf("completing with what was undone: %v, want ErrIdemLost", err)
		}
		// ... but still holds the record, and completes it with what it makes itself.
		want(begin(s, Alice, "k10", held("fp", "b")), store.IdemNew, "b", "")
		if err := s.CompleteIdempotent(ctx, Alice, "k10", "b", "b", []byte("b's")); err != nil {
			t.Fatal(err)
		}
		got := begin(s, Alice, "k10", held("fp", "c"))
		want(got, store.IdemDone, "b", "")
		if string(got.Response) != "b's" {
			t.Errorf("replayed %q, want b's", got.Response)
		}
	})

	t.Run("AbandonAfterTakeoverGivesItBack", func(t *testing.T) {
		s := f(t, Options{})
		lapsing := func(cand string) store.IdemBegin {
			return store.IdemBegin{Fingerprint: "fp", Candidate: cand, Lock: 0, TTL: time.Hour}
		}
		want(begin(s, Alice, "k5", lapsing("a")), store.IdemNew, "a", "")
		want(begin(s, Alice, "k5", held("fp", "b")), store.IdemNew, "b", "a")
		// b is refused and made nothing: the record is a's again, not gone, so that a, which
		// stalled and may yet make its resource, completes it, where a record gone would let
		// a retry make a second resource under the key.
		if err := s.AbandonIdempotent(ctx, Alice, "k5", "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIdempotent(ctx, Alice, "k5", "a", "a", []byte("a's")); err != nil {
			t.Errorf("the stalled attempt's complete after the takeover's refusal: %v", err)
		}
		if got := begin(s, Alice, "k5", held("fp", "c")); got.State != store.IdemDone || string(got.Response) != "a's" {
			t.Errorf("the key after a completed: %+v, want a's response", got)
		}

		// Given back, it is lapsed: the next attempt takes it over at once, told of a.
		want(begin(s, Alice, "k6", lapsing("a")), store.IdemNew, "a", "")
		want(begin(s, Alice, "k6", held("fp", "b")), store.IdemNew, "b", "a")
		if err := s.AbandonIdempotent(ctx, Alice, "k6", "b"); err != nil {
			t.Fatal(err)
		}
		want(begin(s, Alice, "k6", held("fp", "a")), store.IdemNew, "a", "") // a's own retry
		want(begin(s, Alice, "k6", held("fp", "c")), store.IdemNew, "c", "a")
		// And an abandon by the attempt it was given back to, with nothing before it, frees it.
		want(begin(s, Alice, "k7", lapsing("a")), store.IdemNew, "a", "")
		want(begin(s, Alice, "k7", held("fp", "b")), store.IdemNew, "b", "a")
		for _, cand := range []string{"b", "a"} {
			if err := s.AbandonIdempotent(ctx, Alice, "k7", cand); err != nil {
				t.Fatal(err)
			}
		}
		want(begin(s, Alice, "k7", held("other", "d")), store.IdemNew, "d", "")
	})

	t.Run("AttemptThatReportedInIsNotGivenItBack", func(t *testing.T) {
		s := f(t, Options{})
		lapsing := func(cand string) store.IdemBegin {
			return store.IdemBegin{Fingerprint: "fp", Candidate: cand, Lock: 0, TTL: time.Hour}
		}
		// a stalled, b took over; a came back and was told it lost (it undoes what it made),
		// or was refused and made nothing. b, refused too, must then free the record, not give
		// it back to a: the next attempt would look for a's resource, find it undone (an ask
		// ended unrun, error{cancelled}) and answer that for the key.
		for key, report := range map[string]func() error{
			"k8": func() error { return s.CompleteIdempotent(ctx, Alice, "k8", "a", "a", []byte("a's")) },
			"k9": func() error { return s.AbandonIdempotent(ctx, Alice, "k9", "a") },
		} {
			want(begin(s, Alice, key, lapsing("a")), store.IdemNew, "a", "")
			want(begin(s, Alice, key, held("fp", "b")), store.IdemNew, "b", "a")
			if err := report(); err != nil && !errors.Is(err, store.ErrIdemLost) {
				t.Fatalf("%s: a reporting in: %v", key, err)
			}
			if err := s.AbandonIdempotent(ctx, Alice, key, "b"); err != nil {
				t.Fatal(err)
			}
			want(begin(s, Alice, key, held("fp", "c")), store.IdemNew, "c", "")
		}
	})
}
