package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// Defaults for Options' zero values.
const (
	DefaultPrefix = "ask:"
	DefaultLease  = 10 * time.Second
)

// Options configure New. Zero values mean defaults.
type Options struct {
	// URL is the Redis to use (redis://[user:password@]host:port/db, or rediss:// for TLS),
	// when Client is nil.
	URL string
	// Client is an existing client; New uses it instead of URL, and Close leaves it open.
	Client *goredis.Client
	// Prefix starts every key and the change channel; default DefaultPrefix. Replicas that
	// share tickets use the same prefix.
	Prefix string
	// Replica names this store instance as the runner of the tickets it creates; default a
	// random name. Two instances must never share one.
	Replica string
	// TTL is how long a finished ticket, and an idle conversation, are retained
	// (default store.DefaultTTL).
	TTL time.Duration
	// MaxEvents bounds each ticket's retained events (default store.DefaultMaxEvents).
	MaxEvents int
	// Lease is how long a running ticket's lease lasts without renewal (default DefaultLease).
	Lease time.Duration
	// Logger receives the store's few logs (a lost subscription); nil discards them.
	Logger *slog.Logger
}

// Store is the Redis-backed store.Shared. See the package documentation for the keys it
// keeps. It holds one goroutine, which receives change notifications; Close stops it.
type Store struct {
	rdb       *goredis.Client
	ownClient bool
	keys      keys
	replica   string
	ttl       time.Duration
	maxEvents int
	lease     time.Duration
	log       *slog.Logger

	sub      *goredis.PubSub
	listened chan struct{} // closed when the notification goroutine returns
	waiters  waiters
}

var _ store.Shared = (*Store)(nil)

// New connects, subscribes to change notifications and returns the store. It fails if Redis
// cannot be reached within ctx.
func New(ctx context.Context, opts Options) (*Store, error) {
	s := &Store{
		rdb:       opts.Client,
		keys:      keys{prefix: opts.Prefix},
		replica:   opts.Replica,
		ttl:       opts.TTL,
		maxEvents: opts.MaxEvents,
		lease:     opts.Lease,
		log:       opts.Logger,
		listened:  make(chan struct{}),
		waiters:   waiters{m: map[string]chan struct{}{}},
	}
	if s.keys.prefix == "" {
		s.keys.prefix = DefaultPrefix
	}
	if s.replica == "" {
		s.replica = rand.Text()
	}
	if s.ttl <= 0 {
		s.ttl = store.DefaultTTL
	}
	if s.maxEvents <= 0 {
		s.maxEvents = store.DefaultMaxEvents
	}
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.rdb == nil {
		o, err := goredis.ParseURL(opts.URL)
		if err != nil {
			// The URL may carry a password: do not echo it.
			return nil, errors.New("redis store: the URL is not a redis:// or rediss:// URL")
		}
		s.rdb, s.ownClient = goredis.NewClient(o), true
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		s.closeClient()
		return nil, fmt.Errorf("redis store: %w", err)
	}
	s.warnIfPersistent(ctx)
	s.sub = s.rdb.Subscribe(ctx, s.keys.changed())
	if _, err := s.sub.Receive(ctx); err != nil { // the subscription's confirmation
		_ = s.sub.Close()
		s.closeClient()
		return nil, fmt.Errorf("redis store: subscribe: %w", err)
	}
	go s.listen(s.sub.ChannelWithSubscriptions())
	return s, nil
}

// Lease implements store.Shared.
func (s *Store) Lease() time.Duration { return s.lease }

// Replica is the name this instance runs tickets under.
func (s *Store) Replica() string { return s.replica }

// Close stops receiving notifications, wakes every waiting reader and closes the client if
// New opened it. Tickets, logs and conversations stay in Redis until their TTL.
func (s *Store) Close() error {
	err := s.sub.Close()
	<-s.listened
	s.waiters.wakeAll()
	if cerr := s.closeClient(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

func (s *Store) closeClient() error {
	if s.ownClient {
		return s.rdb.Close()
	}
	return nil
}

// Ping reports whether Redis answers, for readiness probes.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// warnIfPersistent logs a warning when the server writes RDB snapshots or an AOF: conversation
// memory must never reach a disk. A server that does not answer CONFIG GET (managed Redis) is
// not judged.
func (s *Store) warnIfPersistent(ctx context.Context) {
	save, err1 := s.rdb.ConfigGet(ctx, "save").Result()
	aof, err2 := s.rdb.ConfigGet(ctx, "appendonly").Result()
	if err1 != nil || err2 != nil {
		return
	}
	if save["save"] != "" || aof["appendonly"] == "yes" {
		s.log.Warn("redis store: this Redis persists to disk (RDB or AOF) and would write conversation memory there; run it with --save \"\" --appendonly no",
			"save", save["save"], "appendonly", aof["appendonly"])
	}
}
