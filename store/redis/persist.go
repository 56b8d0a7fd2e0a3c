package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// The memory-only mode's promise (the question never reaches a disk readable) holds only while
// Redis does not persist, and New's check is of the Redis it met at the start. A Redis that is
// restarted with appendonly yes on the same address, or told CONFIG SET appendonly yes, would
// write every question after it to its AOF. So a store that does not seal keeps asking:
//
//   - on every new connection of a client it opened (OnConnect, before the connection's first
//     command): a restarted Redis is met on new connections, so it is judged before a question
//     can reach it;
//   - when its subscription is re-established (a reconnect), when it finds the generation key
//     missing (a Redis that lost everything: a new instance), and every
//     Options.PersistenceCheck (a minute by default): a CONFIG SET on a running Redis opens no
//     connection, and a client the caller opened (Options.Client) is not hooked.
//
// While Redis persists, every write that holds a question (a creation, an end, whose turn
// holds it, a restore) is refused before it is sent: ErrWouldPersist with
// store.ErrUnavailable, so the service answers 503 and a run retries its end within its lease
// (ended error{interrupted} past it, once Redis stops persisting). What Redis held before it
// began to persist is not the store's to take back: an AOF rewrite writes it all. Appends
// (steps hold no question), reads and renewals go on. The store asks again at most every
// recheckRefusing while a question waits on the answer (and Refusing, the readiness probe's
// question, does the same), so it recovers by itself within a second of Redis no longer
// persisting. A Redis that refuses CONFIG GET (a managed Redis) cannot be judged: as at the
// start, the store warns once and goes on.

// DefaultPersistenceCheck is Options.PersistenceCheck's default.
const DefaultPersistenceCheck = time.Minute

// recheckRefusing is how old the verdict may be, while the store refuses, before a question
// waiting on it asks Redis again; refusingEvery is how often the watch asks meanwhile.
const (
	recheckRefusing = time.Second
	refusingEvery   = 5 * time.Second
)

// ReasonPersistsUnsealed is Refusing's answer while the store refuses questions.
const ReasonPersistsUnsealed = "store_persists_unsealed"

// errPersists is what a write that holds a question meets while Redis persists.
var errPersists = fmt.Errorf(`redis store: %w: Redis persists to disk (RDB or AOF) and the store does not seal; `+
	`the question is not written until Redis runs with --save "" --appendonly no --repl-diskless-sync yes again, or the store is given seal keys (DAS_ASK_SEAL_KEYS): %w`,
	store.ErrUnavailable, store.ErrWouldPersist)

type persistWatch struct {
	refusing atomic.Bool
	armed    atomic.Bool   // New's own check is done: the hook and the watch judge from now on
	checked  atomic.Int64  // when the last full check answered (unix ns)
	flagged  atomic.Uint64 // new connections found persisting, counted: a full check that began before one does not clear it
	logged   atomic.Int64  // when the refusal was last logged (unix ns)

	mu       sync.Mutex // one full check at a time
	cantTell bool       // CONFIG GET was refused (warned once)

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// watchPersistence arms the checks and starts the watch's goroutine (when the store does not
// seal: sealed, persistence is the durable mode). cantTell is New's finding that CONFIG GET is
// refused.
func (s *Store) watchPersistence(every time.Duration, cantTell bool) {
	w := &s.persist
	if s.seal != nil {
		return
	}
	if every <= 0 {
		every = DefaultPersistenceCheck
	}
	w.cantTell = cantTell
	w.checked.Store(time.Now().UnixNano())
	w.kick = make(chan struct{}, 1)
	w.done = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.armed.Store(true)
	go func() {
		defer close(w.done)
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
			case <-t.C:
			}
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			s.recheckPersistence(cctx, 0)
			ccancel()
			next := every
			if w.refusing.Load() {
				next = min(every, refusingEvery)
			}
			t.Reset(next)
		}
	}()
}

// stopPersistenceWatch stops the watch's goroutine.
func (s *Store) stopPersistenceWatch() {
	w := &s.persist
	w.armed.Store(false)
	if w.cancel != nil {
		w.cancel()
		<-w.done
	}
}

// kickPersistence asks the watch for a full check now.
func (s *Store) kickPersistence() {
	if !s.persist.armed.Load() {
		return
	}
	select {
	case s.persist.kick <- struct{}{}:
	default:
	}
}

// recheckPersistence asks Redis (every primary) whether it persists, unless a check answered
// less than maxAge ago, and refuses questions while it does. A Redis that does not answer
// leaves the verdict as it was; one that refuses CONFIG GET cannot be judged (warned once).
func (s *Store) recheckPersistence(ctx context.Context, maxAge time.Duration) {
	w := &s.persist
	w.mu.Lock()
	defer w.mu.Unlock()
	if maxAge > 0 && time.Since(time.Unix(0, w.checked.Load())) < maxAge {
		return
	}
	flagged := w.flagged.Load()
	d, err := s.persistence(ctx)
	if err != nil {
		var re goredis.Error
		if !errors.As(err, &re) || transientReply(re.Error()) {
			return // not answered: the verdict stands
		}
		if !w.cantTell {
			w.cantTell = true
			s.log.Warn("redis store: cannot tell whether this Redis persists (CONFIG GET refused); if it does, it writes the question text to disk unsealed: set seal keys (DAS_ASK_SEAL_KEYS)")
		}
		w.checked.Store(time.Now().UnixNano())
		s.setRefusing(false, diskUse{})
		return
	}
	w.cantTell = false
	w.checked.Store(time.Now().UnixNano())
	if !d.persists() && w.flagged.Load() != flagged {
		s.kickPersistence() // a new connection found Redis persisting meanwhile: ask again
		return
	}
	s.setRefusing(d.persists(), d)
}

// setRefusing records the verdict, and says so at error level when the store begins to refuse
// (and again every minute while it does), at warn level when it stops.
func (s *Store) setRefusing(on bool, d diskUse) {
	w := &s.persist
	was := w.refusing.Swap(on)
	now := time.Now()
	switch {
	case on && (!was || now.Sub(time.Unix(0, w.logged.Load())) >= time.Minute):
		w.logged.Store(now.UnixNano())
		s.log.Error(`redis store: this Redis persists to disk (RDB or AOF, or an RDB file for each replica's sync) and the store does not seal: every write that holds a question is refused `+
			`(creates answer 503; running asks cannot end) until Redis runs with --save "" --appendonly no --repl-diskless-sync yes again (CONFIG SET appendonly no; CONFIG SET save ""; CONFIG SET repl-diskless-sync yes) `+
			`or the service is given seal keys (DAS_ASK_SEAL_KEYS); what Redis held before it began to persist may already be on its disk`,
			"appendonly", d.aof, "save", d.save, "repl_diskless_sync", d.replSync)
	case !on && was:
		s.log.Warn("redis store: this Redis no longer persists; questions are written again")
	}
}

// onConnect judges each new connection of a client the store opened, before its first
// command: a Redis restarted to persist is met on new connections. A server that refuses
// CONFIG GET (a Sentinel, a managed Redis) is not judged here.
func (s *Store) onConnect(ctx context.Context, cn *goredis.Conn) error {
	w := &s.persist
	if !w.armed.Load() {
		return nil
	}
	var save, aof, replSync *goredis.MapStringStringCmd
	_, err := cn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		save = p.ConfigGet(ctx, "save")
		aof = p.ConfigGet(ctx, "appendonly")
		replSync = p.ConfigGet(ctx, "repl-diskless-sync")
		return nil
	})
	if err != nil {
		var re goredis.Error
		if errors.As(err, &re) {
			return nil
		}
		return err
	}
	if d := diskUseOf(save.Val(), aof.Val(), replSync.Val()); d.persists() {
		w.flagged.Add(1)
		s.setRefusing(true, d)
	} else if w.refusing.Load() {
		s.kickPersistence()
	}
	return nil
}

// questionSafe reports whether a write that holds a question may go to Redis now: nil, or
// errPersists while Redis persists (asked again first when the verdict is older than
// recheckRefusing).
func (s *Store) questionSafe(ctx context.Context) error {
	w := &s.persist
	if !w.refusing.Load() {
		return nil
	}
	s.recheckPersistence(ctx, recheckRefusing)
	if w.refusing.Load() {
		return errPersists
	}
	return nil
}

// Refusing names why the store refuses work although Redis answers, for the readiness probe:
// ReasonPersistsUnsealed while Redis persists and the store does not seal (asked again when the
// verdict is older than a second), else "".
func (s *Store) Refusing(ctx context.Context) string {
	if s.questionSafe(ctx) != nil {
		return ReasonPersistsUnsealed
	}
	return ""
}
