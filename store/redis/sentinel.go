package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// On a Sentinel URL the store's change notifications must follow the primary. go-redis's
// failover client, told by a Sentinel's +switch-master that the primary moved, closes its
// pooled connections to the old one, but not a subscription's: the store's stays on the old
// primary, which goes on taking commands until the Sentinel turns it into a replica (10–15 s
// later in TestSentinelFailoverMidRun), and never sees what is published on the new one
// meanwhile. A reader waiting there for another replica's appends would wait past them (for
// good, if the run ended meanwhile). So the store listens to the Sentinels' +switch-master
// itself, and when its primary moves it subscribes again, on the new primary, and wakes every
// reader to read again what it may have missed. (The mend belongs in go-redis, whose answer to
// its issue 583 was to close every connection to the old primary; v9's onFailover closes the
// pooled and pipeline connections only. This is the store's until it does.)

// errClosed: the store closed while a subscription was being replaced.
var errClosed = errors.New("redis store: closed")

// resubscribeWithin bounds a new subscription's confirmations after a switch.
const resubscribeWithin = 10 * time.Second

// switches is the store's watch of its primary's moves: one subscription to +switch-master on
// each Sentinel of the URL (any of them may be the one that answers).
type switches struct {
	master string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	last string // the primary's address after the last switch acted on
}

// watchSentinels starts the watch of uo's Sentinels for uo.MasterName's moves.
func (s *Store) watchSentinels(uo *goredis.UniversalOptions) {
	ctx, cancel := context.WithCancel(context.Background())
	s.switches = &switches{master: uo.MasterName, cancel: cancel}
	for _, addr := range uo.Addrs {
		s.switches.wg.Go(func() { s.watchSentinel(ctx, addr, uo) })
	}
}

// watchSentinel acts on the +switch-master messages of the Sentinel at addr that name the
// store's master ("<master> <old ip> <old port> <new ip> <new port>") until ctx ends. go-redis
// reconnects the subscription if the Sentinel goes away.
func (s *Store) watchSentinel(ctx context.Context, addr string, uo *goredis.UniversalOptions) {
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: addr, TLSConfig: uo.TLSConfig, Protocol: 2})
	defer sc.Close()
	ps := sc.Subscribe(ctx, "+switch-master")
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			f := strings.Fields(m.Payload)
			if len(f) == 5 && f[0] == s.switches.master {
				s.switched(ctx, f[3]+":"+f[4])
			}
		}
	}
}

// switched subscribes again (on the primary the failover client now dials) once per new
// primary address, whichever Sentinel told first, and wakes every reader.
func (s *Store) switched(ctx context.Context, primary string) {
	w := s.switches
	w.mu.Lock()
	defer w.mu.Unlock()
	if primary == w.last {
		return
	}
	w.last = primary
	err := s.resubscribe(ctx)
	if ctx.Err() != nil || errors.Is(err, errClosed) {
		return // the store is closing
	}
	if err != nil {
		// The old subscription goes on (it hears the new primary once the old one replicates
		// it), and the next switch tries again.
		s.log.Warn("redis store: the Sentinel moved the primary; change notifications not re-subscribed", "primary", primary, "err", err)
		return
	}
	s.log.Warn("redis store: the Sentinel moved the primary; change notifications re-subscribed there, waking every reader", "primary", primary)
	s.reconnected() // a failover may have lost the old primary's last writes, as a restart may
	s.hub.reset()
}

// resubscribe replaces the store's subscription with a new one, once the new one is
// confirmed; the notification goroutine goes on with it.
func (s *Store) resubscribe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, resubscribeWithin)
	defer cancel()
	sub := s.rdb.Subscribe(ctx, s.keys.changed(), s.keys.ended())
	for range 2 { // the subscriptions' confirmations
		if _, err := sub.Receive(ctx); err != nil {
			_ = sub.Close()
			return err
		}
	}
	s.subMu.Lock()
	if s.subClosed {
		s.subMu.Unlock()
		return errors.Join(errClosed, sub.Close())
	}
	old := s.sub
	s.sub = sub
	s.subMu.Unlock()
	err := old.Close() // the notification goroutine's channel closes: it takes sub next
	s.resub <- sub
	return err
}

// askSentinelsWithin bounds each Sentinel's answer to whyNoPrimary.
const askSentinelsWithin = time.Second

// whyNoPrimary says why the failover client reached no primary at the start, by asking each
// Sentinel of the URL for uo.MasterName itself; nil when one names a primary (that primary is
// then what did not answer, as the client's error says). go-redis words a master name that no
// Sentinel monitors as "all sentinels specified in configuration are unreachable: redis: nil"
// (an audit took it for Sentinels that were down), and Sentinels that are down as its dial's
// deadline, "context deadline exceeded", naming none of them. The question is asked even when
// ctx's deadline has passed (the start's dial used it up), under its own bound.
func whyNoPrimary(ctx context.Context, uo *goredis.UniversalOptions) error {
	var know []string
	var down []string
	for _, addr := range uo.Addrs {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askSentinelsWithin)
		sc := goredis.NewSentinelClient(&goredis.Options{Addr: addr, TLSConfig: uo.TLSConfig, Protocol: 2, MaxRetries: -1})
		_, err := sc.GetMasterAddrByName(ctx, uo.MasterName).Result()
		_ = sc.Close()
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, goredis.Nil):
			know = append(know, addr)
		default:
			down = append(down, addr+": "+err.Error())
		}
	}
	if len(know) > 0 {
		return fmt.Errorf("redis store: no Sentinel monitors a primary named %q (asked %s; the name is the URL's path)",
			uo.MasterName, strings.Join(know, ", "))
	}
	return fmt.Errorf("redis store: no Sentinel of the URL answered (%s)", strings.Join(down, "; "))
}
