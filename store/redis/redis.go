package redis

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/seal"
)

// Defaults for Options' zero values.
const (
	DefaultPrefix = "ask:"
	DefaultLease  = 10 * time.Second
	// DefaultClusterBuckets is Options.Buckets' default on Redis Cluster.
	DefaultClusterBuckets = 16
)

// Options configure New. Zero values mean defaults.
type Options struct {
	// URL is the Redis to use when Client is nil: redis://[user:password@]host:port/db (rediss://
	// for TLS), redis+cluster://host:port[,host:port...] for Redis Cluster, or
	// redis+sentinel://host:port[,host:port...]/master[/db] for a Sentinel-managed primary
	// (see newClient).
	URL string
	// Client is an existing client (a *goredis.Client, *goredis.ClusterClient or a
	// failover client); New uses it instead of URL, and Close leaves it open.
	Client goredis.UniversalClient
	// Buckets is how many buckets the keys are spread over (see the package documentation):
	// default 1 on one Redis (the store-wide caps are then exact) and DefaultClusterBuckets on
	// Redis Cluster. Replicas that share tickets use the same Buckets, as the same Prefix.
	Buckets int
	// Prefix starts every key and the change channel; default DefaultPrefix. Replicas that
	// share tickets use the same prefix. It holds no { or }: every key's hash tag holds it
	// ({<prefix>b<N>}), and a brace would make Redis Cluster hash a part of the prefix instead
	// of the bucket. New refuses one.
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
	// CacheBytes bounds the memory of the tail hub, which keeps the logs this instance's
	// readers read (running tickets' and, until their TTL, finished ones', so that a replay
	// is answered from memory): about the events' bytes plus 64 bytes an event, least
	// recently read dropped first. Zero means DefaultCacheBytes (64 MiB); a bound below one
	// ticket's log keeps only the ticket read last.
	CacheBytes int64
	// Logger receives the store's few logs (a lost subscription); nil discards them.
	Logger *slog.Logger
	// Seal, when set, seals the question at rest: the accepted event, the ticket's question
	// and the conversation turns are sealed before they reach Redis and opened when read (see package seal). It
	// is required when Redis persists (AOF or RDB, the durable mode): New refuses a
	// persisting Redis without it. Replicas that share tickets need the same keys.
	Seal *seal.Keys
	// PersistenceCheck is how often a store without Seal asks Redis again whether it persists
	// (default DefaultPersistenceCheck); it also asks on every new connection of a client it
	// opened, at a reconnect and at a new generation, and refuses questions while Redis
	// persists (persist.go).
	PersistenceCheck time.Duration
}

// Store is the Redis-backed store.Shared. See the package documentation for the keys it
// keeps. It holds one goroutine, which receives change notifications; Close stops it. Its
// readers share one tail of each ticket's log (the tail hub, hub.go).
type Store struct {
	now       func() time.Time // the caller's clock, which the outbox's times are read on (time.Now)
	rdb       goredis.UniversalClient
	writes    scripter // the run's scripts: rdb's autopipeline where it has one (pipeline), else rdb
	ownClient bool
	keys      keys
	replica   string
	ttl       time.Duration
	recheck   time.Duration // how far ahead a sweep scores a running conversation's entry (recheckRunning)
	maxEvents int
	lease     time.Duration
	log       *slog.Logger
	seal      *seal.Keys

	runs      runs          // the tickets this instance runs: Finish names their keys without a read
	ends      ends          // the runs' own ends that arrive together, sent as one call per bucket
	claimFrom atomic.Uint32 // the bucket ClaimWebhooks starts at, moving on at every call
	// seenGen is the generation this instance last read or set (Generation): one it finds
	// replaced is a Redis that lost everything it held, which it says (sawGeneration).
	seenGen atomic.Pointer[string]

	subMu     sync.Mutex
	sub       *goredis.PubSub      // the change notifications' subscription (replaced after a Sentinel switch)
	subClosed bool                 // Close began: sub is not replaced again
	resub     chan *goredis.PubSub // a subscription that replaced sub, for the notification goroutine
	// reconnects says that the change notifications were subscribed again (Reconnects).
	reconnects chan struct{}
	switches   *switches     // on a Sentinel URL, the watch of the primary's moves (sentinel.go)
	persist    persistWatch  // the memory-only mode's watch that Redis still does not persist (persist.go)
	listened   chan struct{} // closed when the notification goroutine returns
	hub        *hub
	// calls are the creations whose caller stopped waiting (CreateTicket's PendingError),
	// running to the store's answer, and the recording of floors after a reconnect
	// (raiseFloors); Close waits for them once the client is closed.
	calls sync.WaitGroup
}

var (
	_ store.Shared = (*Store)(nil)
	_ store.Homed  = (*Store)(nil)
)

// New connects, subscribes to change notifications and returns the store. It fails if Redis
// cannot be reached within ctx.
func New(ctx context.Context, opts Options) (*Store, error) {
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("redis store: prefix %q: want no { or }, which would move every key's hash tag", opts.Prefix)
	}
	s := &Store{
		now:        time.Now,
		rdb:        opts.Client,
		keys:       keys{prefix: opts.Prefix, buckets: opts.Buckets},
		replica:    opts.Replica,
		ttl:        opts.TTL,
		maxEvents:  opts.MaxEvents,
		lease:      opts.Lease,
		log:        opts.Logger,
		seal:       opts.Seal,
		listened:   make(chan struct{}),
		resub:      make(chan *goredis.PubSub),
		reconnects: make(chan struct{}, 1),
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
	s.recheck = min(recheckRunning, s.ttl)
	if s.maxEvents <= 0 {
		s.maxEvents = store.DefaultMaxEvents
	}
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	s.hub = newHub(s.fetch, s.maxEvents, cacheBytes, s.ttl)
	var sentinel *goredis.UniversalOptions // the Sentinel URL's, whose switches the store watches
	if s.rdb == nil {
		rdb, uo, err := newClient(opts.URL, s.onConnect)
		if err != nil {
			return nil, err
		}
		s.rdb, s.ownClient, sentinel = rdb, true, uo
	}
	if s.keys.buckets <= 0 {
		s.keys.buckets = 1
		if _, ok := s.rdb.(*goredis.ClusterClient); ok {
			s.keys.buckets = DefaultClusterBuckets
		}
	}
	s.keys = s.keys.made()
	var err error
	s.ends.s = s
	if s.writes, err = pipeline(s.rdb); err != nil {
		s.closeClient()
		return nil, fmt.Errorf("redis store: %w", err)
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		s.closeClient()
		if sentinel != nil {
			if why := whyNoPrimary(ctx, sentinel); why != nil {
				return nil, why
			}
		}
		return nil, fmt.Errorf("redis store: %w", err)
	}
	cantTell, err := s.checkPersistence(ctx)
	if err != nil {
		s.closeClient()
		return nil, err
	}
	s.checkStreamNodes(ctx)
	s.checkEviction(ctx)
	s.sub = s.rdb.Subscribe(ctx, s.keys.changed(), s.keys.ended())
	for range 2 { // the subscriptions' confirmations
		if _, err := s.sub.Receive(ctx); err != nil {
			_ = s.sub.Close()
			s.closeClient()
			return nil, fmt.Errorf("redis store: subscribe: %w", err)
		}
	}
	go s.listen(s.sub)
	if sentinel != nil {
		s.watchSentinels(sentinel)
	}
	s.watchPersistence(opts.PersistenceCheck, cantTell)
	return s, nil
}

// Generation implements store.Generational: a short random name kept in Redis under the
// prefix, set by whichever instance first finds it missing (at the start, or after a restart
// that lost everything). The durable mode keeps it across restarts, as it keeps the tickets.
func (s *Store) Generation(ctx context.Context) (string, error) {
	g := rand.Text()[:8]
	old, err := s.rdb.SetArgs(ctx, s.keys.generation(), g, goredis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, goredis.Nil) {
		s.kickPersistence() // a Redis that lost everything may be a new one, set up otherwise
		s.sawGeneration(ctx, g)
		return g, nil
	}
	if err != nil {
		return "", wrap(err)
	}
	s.sawGeneration(ctx, old)
	return old, nil
}

// sawGeneration notes g as the store's generation, and warns when it replaced the one this
// instance saw before: Redis lost everything it held (a memory-only Redis restarted, a durable
// one restarted without its AOF or on another server, the key evicted), so every ticket and
// conversation made before reads 404 lost and the asks running end error{interrupted}. A
// durable store asks again how Redis persists, and says so as at the start: an audit restarted
// a durable mode's Redis with --appendonly no, and the store's only line was its
// subscription's reconnect. (Two calls racing across a change may each warn; never none.)
func (s *Store) sawGeneration(ctx context.Context, g string) {
	prev := s.seenGen.Swap(&g)
	if prev == nil || *prev == g {
		return
	}
	s.log.Warn("redis store: Redis lost everything it held (its generation changed): tickets and conversations made before read 404 lost, asks running end error{interrupted}",
		"generation", g, "was", *prev)
	if s.seal != nil {
		_, _ = s.checkPersistence(ctx)
	}
}

// Home implements store.Homed: the mark ("b<N>") of the owner's bucket, which the service ends
// the ids of the owner's conversations and tickets with ("-b<N>"), so that the store finds
// their keys from the id alone.
func (s *Store) Home(o store.Owner) string { return homeMark(s.keys.home(o)) }

// Buckets is how many buckets the store's keys are spread over (Options.Buckets).
func (s *Store) Buckets() int { return s.keys.buckets }

// Lease implements store.Shared.
func (s *Store) Lease() time.Duration { return s.lease }

// Replica is the name this instance runs tickets under.
func (s *Store) Replica() string { return s.replica }

// Close stops receiving notifications, wakes every waiting reader and closes the client if
// New opened it. Tickets, logs and conversations stay in Redis until their TTL.
func (s *Store) Close() error {
	s.stopPersistenceWatch()
	s.subMu.Lock()
	s.subClosed = true
	s.subMu.Unlock()
	if s.switches != nil {
		s.switches.cancel()
		s.switches.wg.Wait()
	}
	s.subMu.Lock()
	sub := s.sub
	s.subMu.Unlock()
	err := sub.Close()
	close(s.resub)
	<-s.listened
	s.hub.reset()
	if cerr := s.closeClient(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	s.calls.Wait()
	return err
}

// pipeline is what the run's scripts (creation, appends, the end) go through: the client's
// full-duplex autopipeline. It holds one connection (one per primary on a cluster) with a
// writer and a reader goroutine, and streams onto it the scripts that many runs call at once,
// so they share writes and reads on both sides instead of paying a write and a read syscall
// each; a lone call still goes out at once, in one round trip. (The half-duplex autopipeline,
// go-redis's default, waits for a batch's replies before it sends the next, and holds a lone
// call for stragglers: measured, it doubled the CPU and latency of an ask at concurrency 1.) A
// script is one command and each is idempotent (see scripts.go), so one the client retries
// after a lost reply answers as its first run did. The autopipeline does not see a call's own
// context once the call is queued: a stalled Redis fails the call at the client's read
// timeout, and the service's retries go on from there. Its asynchronous face is used (each
// call queued with Submit, its caller waiting on the future), so that a creation's caller can
// stop waiting at its deadline while the call goes on (CreateTicket's PendingError) without a
// goroutine per call: one per creation cost the Redis time-to-ticket line about 15% in paired
// quick runs (2.56-2.57x against 2.12-2.23x), the asynchronous face about 3% (2.37-2.39x
// against 2.30-2.33x) and 500 bytes an ask. A client of another kind (a test's wrapper, a
// Ring) runs the scripts itself.
func pipeline(c goredis.UniversalClient) (scripter, error) {
	o := goredis.DefaultBlockingAutoPipelineOptions()
	o.FullDuplex = true
	switch c := c.(type) {
	case *goredis.Client:
		return c.AsyncAutoPipelineWithOptions(o)
	case *goredis.ClusterClient:
		return c.AsyncAutoPipelineWithOptions(o)
	}
	return c, nil
}

func (s *Store) closeClient() error {
	if s.ownClient {
		return s.rdb.Close()
	}
	return nil
}

// Ping reports whether Redis answers, for readiness probes.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// checkPersistence refuses a Redis that writes RDB snapshots or an AOF when the store does not
// seal: the question text must never reach a disk readable. Sealed, persistence is the durable
// mode; the store says which mode it runs in. A server that does not answer CONFIG GET
// (managed Redis) cannot be judged: the store warns and goes on (cantTell). This is the check
// at the start; persist.go keeps checking while the store runs.
func (s *Store) checkPersistence(ctx context.Context) (cantTell bool, err error) {
	d, err := s.persistence(ctx)
	if err != nil {
		if s.seal == nil {
			s.log.Warn("redis store: cannot tell whether this Redis persists (CONFIG GET refused); if it does, it writes the question text to disk unsealed: set seal keys (DAS_ASK_SEAL_KEYS)")
		}
		return true, nil
	}
	switch {
	case d.persists() && s.seal == nil:
		return false, errors.New(`redis store: this Redis persists to disk (RDB or AOF, or an RDB file for each replica's sync) and would write the question text there readable: ` +
			`seal it at rest (DAS_ASK_SEAL_KEYS) for the durable mode, or run Redis with --save "" --appendonly no --repl-diskless-sync yes`)
	case d.persists():
		fsync := s.configValue(ctx, "appendfsync")
		s.log.Info("redis store: durable mode: Redis persists; the question is sealed at rest", "appendonly", d.aof,
			"appendfsync", fsync, "save", d.save, "seal_key", s.seal.SealingKey(), "buckets", s.keys.buckets)
		s.checkDurability(d, fsync)
	default:
		s.log.Info("redis store: memory-only mode: Redis does not persist; a Redis restart loses every ticket and conversation", "buckets", s.keys.buckets)
	}
	return false, nil
}

// StreamNodeMaxBytes is the stream-node-max-bytes the store asks of Redis (docs/scale-out.md,
// "Sizing Redis"): a stream's first node takes that much memory at its first entry (4096 by
// default) and keeps it until it is full, which a ticket's log seldom fills. At 2048 Redis
// holds about 3.6 KB per trivial ask instead of 5.6 KB (ASK_REDIS_LOAD=10000 go test ./server
// -run TestRedisLoadCost -v, ASK_LOAD_REDIS_CONFIG to compare). internal/redisserver starts
// every server with it.
const StreamNodeMaxBytes = 2048

// checkStreamNodes says, once at the start, when Redis's streams preallocate more per log than a
// ticket's usually holds: a stream's first node takes stream-node-max-bytes at once (4096 by
// default) and keeps it until it is full. Only a hint: a server that does not answer CONFIG
// GET is not judged.
func (s *Store) checkStreamNodes(ctx context.Context) {
	v := s.configValue(ctx, "stream-node-max-bytes")
	if n, err := strconv.Atoi(v); err == nil && (n == 0 || n > StreamNodeMaxBytes) {
		s.log.Info("redis store: stream-node-max-bytes is "+v+": each ticket's log takes that much of Redis's memory at its first event; "+
			strconv.Itoa(StreamNodeMaxBytes)+" holds a short log in less (see docs/scale-out.md, Sizing Redis)",
			"stream_node_max_bytes", n, "recommended", StreamNodeMaxBytes)
	}
}

// checkDurability warns, once at the start, when a Redis the durable mode runs on may lose more
// than its last second in a restart, which is what the durable mode's recovery is built for
// (docs/scale-out.md, "The Redis an operator must run: two modes"): each replica writes again
// the ends and keyed creations of its last ten seconds, and a reader's cursor is believed past
// the log for three leases. Without an AOF a restart goes back to the last RDB snapshot, minutes
// maybe; with appendfsync no a crash of the machine loses what the kernel had not written yet
// (about 30 s on Linux). Past those bounds an ask that had ended comes back running and is
// ended again by the lapse sweep, at seqs its readers were given for other events. Only a
// warning: the question is sealed either way.
func (s *Store) checkDurability(d diskUse, fsync string) {
	switch {
	case d.aof != "yes":
		s.log.Warn("redis store: durable mode without an append-only file (appendonly no): a Redis restart loses everything written since its last RDB snapshot, "+
			"not the last second, and asks that had ended come back running; run Redis with --appendonly yes --appendfsync everysec (see docs/scale-out.md)",
			"appendonly", d.aof, "save", d.save)
	case fsync == "no":
		s.log.Warn("redis store: durable mode with appendfsync no: a crash of the machine loses what the kernel had not yet written of the AOF (about 30 s), "+
			"not the last second, and asks that had ended come back running; run Redis with --appendfsync everysec (see docs/scale-out.md)",
			"appendfsync", fsync)
	}
}

// checkEviction warns, once at the start, of a Redis that evicts keys when it reaches its
// maxmemory (any maxmemory-policy but noeviction): it would drop tickets, logs, conversations
// and the store's generation silently, where noeviction refuses writes, which the service
// answers 503 and waits out (docs/scale-out.md, "Sizing Redis"). Found by an audit: under
// allkeys-lru at its maxmemory, finished tickets read 404 within their TTL and the generation
// key was evicted, so the next ids were minted in a new generation. A server that does not
// answer CONFIG GET is not judged.
func (s *Store) checkEviction(ctx context.Context) {
	policy, limit := s.configValue(ctx, "maxmemory-policy"), s.configValue(ctx, "maxmemory")
	if policy == "" || policy == "noeviction" || limit == "" || limit == "0" {
		return
	}
	s.log.Warn("redis store: maxmemory-policy "+policy+" evicts keys at maxmemory: tickets, their logs and conversations would vanish before their TTL; "+
		"set maxmemory-policy noeviction (see docs/scale-out.md, Sizing Redis)", "maxmemory_policy", policy, "maxmemory", limit)
}

// diskUse is what a Redis writes to disk of what it holds: RDB snapshots on a schedule (save),
// an AOF (appendonly yes), and a snapshot for each replica's full sync when it syncs replicas
// through a file of its own (repl-diskless-sync no, Redis 6's default), which it keeps as its
// dump.rdb. Any of the three puts the question on its disk.
type diskUse struct{ save, aof, replSync string }

func (d diskUse) persists() bool { return d.save != "" || d.aof == "yes" || d.replSync == "no" }

// diskUseOf reads d from CONFIG GET's answers (a setting Redis does not know is "").
func diskUseOf(save, aof, replSync map[string]string) diskUse {
	return diskUse{save: save["save"], aof: aof["appendonly"], replSync: replSync["repl-diskless-sync"]}
}

// persistence asks Redis what it writes to disk: on Redis Cluster every primary, the persisting
// ones winning (one node that persists writes its slots' questions to disk).
func (s *Store) persistence(ctx context.Context) (diskUse, error) {
	get := func(ctx context.Context, c goredis.UniversalClient) (diskUse, error) {
		sv, err1 := c.ConfigGet(ctx, "save").Result()
		ao, err2 := c.ConfigGet(ctx, "appendonly").Result()
		rs, err3 := c.ConfigGet(ctx, "repl-diskless-sync").Result()
		if err := errors.Join(err1, err2, err3); err != nil {
			return diskUse{}, err
		}
		return diskUseOf(sv, ao, rs), nil
	}
	cc, ok := s.rdb.(*goredis.ClusterClient)
	if !ok {
		return get(ctx, s.rdb)
	}
	var mu sync.Mutex
	d := diskUse{aof: "no", replSync: "yes"}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		p, err := get(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if p.save != "" {
			d.save = p.save
		}
		if p.aof == "yes" {
			d.aof = p.aof
		}
		if p.replSync == "no" {
			d.replSync = p.replSync
		}
		return nil
	})
	return d, err
}

func (s *Store) configValue(ctx context.Context, name string) string {
	v, _ := s.rdb.ConfigGet(ctx, name).Result()
	return v[name]
}

// sealAccepted is ticket's accepted event as Redis holds it: sealed when the store seals.
func (s *Store) sealAccepted(ticket string, data []byte) []byte {
	if s.seal == nil {
		return data
	}
	return s.seal.Seal(data, acceptedAD(ticket))
}

// sealQuestion is ticket's question as Redis holds it: a JSON string (so that no question
// reads as a sealed value), sealed when the store seals, as the accepted event is, with its
// own associated data.
func (s *Store) sealQuestion(ticket, q string) []byte {
	b, _ := json.Marshal(q) // a string always encodes
	if s.seal == nil {
		return b
	}
	return s.seal.Seal(b, questionAD(ticket))
}

// open opens a value the store may have sealed for ad. A value that is not sealed is taken as
// it is (written before sealing was configured); one that does not open (its key was dropped:
// crypto-shredded, or it was altered) reports false.
func (s *Store) open(b, ad []byte) ([]byte, bool) {
	if !seal.IsSealed(b) {
		return b, true
	}
	if s.seal == nil {
		return nil, false
	}
	plain, err := s.seal.Open(b, ad)
	return plain, err == nil
}

// The associated data that binds a sealed value to its place.
func acceptedAD(ticket string) []byte { return []byte("ask/accepted\x00" + ticket) }
func turnAD(conv string) []byte       { return []byte("ask/turn\x00" + conv) }
func questionAD(ticket string) []byte { return []byte("ask/question\x00" + ticket) }
