package redis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/internal/redisserver"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/store/storetest"
)

// TestContractCluster runs the store contract, sealed and not, and the outbox's, on a real
// three-primary Redis Cluster, through the store's own redis+cluster:// URL, with the default
// buckets (16, spread over the primaries' slots). Redis Cluster itself refuses a script or
// transaction whose keys span slots (CROSSSLOT), and the slot hook checks the same of every
// call as the client sends it.
func TestContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	url := "redis+cluster://" + strings.Join(c.Addrs(), ",")
	var h slotHook
	open := func(t *testing.T, o redisstore.Options) *redisstore.Store {
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
		cc.AddHook(&h)
		t.Cleanup(func() { _ = cc.Close() })
		o.Client, o.Prefix = cc, "cl:"+rand.Text()+":"
		s, err := redisstore.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if s.Buckets() != redisstore.DefaultClusterBuckets {
			t.Fatalf("buckets on a cluster: %d, want %d", s.Buckets(), redisstore.DefaultClusterBuckets)
		}
		return s
	}
	t.Run("URL", func(t *testing.T) {
		s, err := redisstore.New(t.Context(), redisstore.Options{URL: url, Prefix: "url:" + rand.Text() + ":"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.Buckets() != redisstore.DefaultClusterBuckets {
			t.Errorf("buckets through the URL: %d", s.Buckets())
		}
		g1, err := s.Generation(t.Context())
		g2, err2 := s.Generation(t.Context())
		if err != nil || err2 != nil || g1 == "" || g1 != g2 {
			t.Errorf("generation on a cluster: %q %v, %q %v", g1, err, g2, err2)
		}
	})
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
			return open(t, redisstore.Options{MaxEvents: o.MaxEvents})
		})
	})
	t.Run("ContractSealed", func(t *testing.T) {
		keys, err := seal.ParseKeys(seal.NewKey("k1"))
		if err != nil {
			t.Fatal(err)
		}
		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
			return open(t, redisstore.Options{MaxEvents: o.MaxEvents, Seal: keys})
		})
	})
	t.Run("Outbox", func(t *testing.T) { storetest.Outbox(t, open(t, redisstore.Options{})) })
	t.Run("Lapsed", func(t *testing.T) {
		s := open(t, redisstore.Options{})
		if _, err := s.Lapsed(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.errs {
		t.Error(e)
	}
}

// TestLostRepliesOnCluster: on a real three-primary cluster, every connection to every node
// through a fault proxy (the client dials each node's address through its proxy), each write
// whose reply is lost once answers as if it had arrived, and the store holds its effect once:
// the same idempotency rules as on one server, whichever primary holds the owner's bucket.
func TestLostRepliesOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	proxies := map[string]*faultproxy.Proxy{}
	for _, a := range c.Addrs() {
		p, err := faultproxy.New(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxies[a] = p
	}
	var d net.Dialer
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p, ok := proxies[addr]; ok {
				addr = p.Addr()
			}
			return d.DialContext(ctx, network, addr)
		}})
	t.Cleanup(func() { _ = cc.Close() })
	s, err := redisstore.New(t.Context(), redisstore.Options{Client: cc, Prefix: "clf:" + rand.Text() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Armed on every node, as the test does not say which primary holds the bucket; the drops
	// that did not fire are disarmed before the next step.
	arm := func(match string) {
		for _, p := range proxies {
			p.Disarm()
			p.DropReplies(1, match, faultproxy.Close)
		}
	}
	dropped := func() (n int64) {
		for _, p := range proxies {
			n += p.Stats().RepliesDropped
		}
		return n
	}
	ctx := t.Context()
	limits := store.Limits{MaxConversationsPerOwner: 1, MaxInFlightPerOwner: 1, MaxRetainedPerOwner: 1}
	for i, owner := range []store.Owner{storetest.Alice, storetest.Bob, {Tenant: "u", OID: "carol"}} {
		conv, tk := storetest.ID(s, owner, "conv-lost"+strconv.Itoa(i)), storetest.ID(s, owner, "t"+strconv.Itoa(i))
		before := dropped()
		arm(conv)
		if err := s.CreateConversation(ctx, store.Conversation{ID: conv, Owner: owner, CreatedAt: time.Unix(1700000000, 0)}, limits); err != nil {
			t.Fatalf("owner %d: CreateConversation through a lost reply: %v", i, err)
		}
		arm("accepted-lost")
		nt := store.NewTicket{ID: tk, ConversationID: conv, Owner: owner, CreatedAt: time.Unix(1700000000, 0),
			Accepted: store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: []byte(`"accepted-lost"`)}, Then: []store.Event{storetest.Ev(2, gen.EventTypeBranch)}}
		if _, err := s.CreateTicket(ctx, nt, limits); err != nil {
			t.Fatalf("owner %d: CreateTicket through a lost reply: %v", i, err)
		}
		batch := storetest.Evs(3, 3, gen.EventTypeStep)
		batch[2].Data = []byte(`"batch-lost"`)
		arm("batch-lost")
		if _, err := s.AppendBatch(ctx, tk, batch); err != nil {
			t.Fatalf("owner %d: AppendBatch through a lost reply: %v", i, err)
		}
		tail := storetest.Tail(6)
		tail[2].Data = []byte(`"done-lost"`)
		arm("done-lost")
		if err := s.Finish(ctx, tk, tail, ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer}); err != nil {
			t.Fatalf("owner %d: Finish through a lost reply: %v", i, err)
		}
		for _, p := range proxies {
			p.Disarm()
		}
		if n := dropped() - before; n != 4 {
			t.Fatalf("owner %d: the proxies dropped %d replies, want 4: the faults under test did not fire", i, n)
		}
		b, err := s.Read(ctx, tk, 0)
		if got := storetestSeqs(b.Events); err != nil || got != "1,2,3,4,5,6,7,8" || !b.Finished {
			t.Errorf("owner %d: log %s (finished %v), %v; want 1..8 once each, finished", i, got, b.Finished, err)
		}
		if _, turns, _ := s.Conversation(ctx, conv); len(turns) != 1 {
			t.Errorf("owner %d: %d turns, want 1", i, len(turns))
		}
	}
}

// TestSlotMapFromAFrozenNode: the store's cluster client gives up on a frozen node's slot map
// within a second. A frozen primary (SIGSTOP) accepts connections and answers nothing; go-redis
// reads the slot map from one node at a time, and without a bound waited out its read timeout
// (3 s) on the frozen one, keeping a map that still named it after its replica's election: a
// black-box probe saw every write to its slots wait up to 5.3 s past the election.
func TestSlotMapFromAFrozenNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	rdb, _, err := redisstore.NewClient("redis+cluster://"+strings.Join(c.Addrs(), ","), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	cc := rdb.(*goredis.ClusterClient)
	ctx := t.Context()
	if err := cc.Set(ctx, "frozen", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := cc.MasterForKey(ctx, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.Primaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p *redisserver.Node) bool { return p.Addr == n.Options().Addr })
	if i < 0 {
		t.Fatalf("no primary at %s among %d", n.Options().Addr, len(ps))
	}
	frozen := ps[i]
	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Resume() }()
	start := time.Now()
	err = n.Do(context.Background(), "cluster", "slots").Err() // as go-redis reads the slot map
	took := time.Since(start)
	if err == nil {
		t.Fatal("a frozen node answered CLUSTER SLOTS")
	}
	if took > 1500*time.Millisecond {
		t.Errorf("the slot map read from a frozen node gave up after %v (%v), want under 1.5 s", took.Round(time.Millisecond), err)
	}
}

// TestLapsedWhileAnotherBucketMigrates: a lapsed run in one bucket is listed by the sweep while
// another bucket's slot is being migrated between primaries (marked MIGRATING on its owner and
// IMPORTING on the target, as redis-cli --cluster reshard does first), which answers TRYAGAIN
// to the sweep's script over that bucket for as long as its keys are split. Before, that one
// bucket's error failed the whole sweep, and a dead replica's runs in every bucket stayed
// running until the migration ended (an audit: 20 s past a 4 s lease).
func TestLapsedWhileAnotherBucketMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	ctx := t.Context()
	prefix := "mig:" + rand.Text() + ":"
	open := func(replica string) *redisstore.Store {
		s, err := redisstore.New(ctx, redisstore.Options{URL: c.URL(), Prefix: prefix, Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	runner, sweeper := open("runner"), open("sweeper")
	storetest.MustConv(t, runner, "c", storetest.Alice) // ids without a bucket: bucket 0
	if _, err := storetest.NewTicket(t, runner, "t", "c", storetest.Alice, store.Limits{MaxInFlightPerOwner: 1}); err != nil {
		t.Fatal(err)
	}
	rc := c.Client()
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.ZAdd(ctx, "{"+prefix+"b0}running", goredis.Z{Score: 1, Member: "t"}).Err(); err != nil { // the lease lapses
		t.Fatal(err)
	}
	if ids, err := sweeper.Lapsed(ctx, 10); err != nil || !slices.Equal(ids, []string{"t"}) {
		t.Fatalf("lapsed: %v, %v; want [t]", ids, err)
	}

	startMigrating(t, c, prefix)
	ids, err := sweeper.Lapsed(ctx, 10)
	if !slices.Equal(ids, []string{"t"}) {
		t.Errorf("lapsed while bucket 1's slot migrates: %v (%v); want [t], bucket 0's lapsed run", ids, err)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("lapsed while bucket 1's slot migrates: error %v, want ErrUnavailable (bucket 1 not listed)", err)
	}
}

// startMigrating marks the slot of bucket 1 of prefix as being migrated to another primary
// (MIGRATING on its owner, IMPORTING on the target, as redis-cli --cluster reshard does
// first), so that a script over that bucket's keys, which are not there yet, answers TRYAGAIN;
// the slot is made stable again when the test ends. Bucket 0's slot is another.
func startMigrating(t *testing.T, c *redistest.Cluster, prefix string) {
	t.Helper()
	slot := keySlot("{" + prefix + "b1}")
	if slot == keySlot("{"+prefix+"b0}") {
		t.Fatalf("buckets 0 and 1 share slot %d", slot)
	}
	m, err := c.StartMigration(t.Context(), slot, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Abort(context.Background()) })
}

// TestClaimWebhooksPastARefusingBucket: on a real Redis Cluster, a delivery due in one bucket
// is claimed while another bucket's primary refuses the claim's writes (at its maxmemory:
// OOM, an error reply that bucket alone gets). Before, the claim stopped at the first bucket
// that answered with an error when it had claimed nothing yet, and the buckets after it in
// that call's order waited for later polls (bucket 0 comes last in the first call's).
func TestClaimWebhooksPastARefusingBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	ctx := t.Context()
	prefix := "claim:" + rand.Text() + ":"
	s, err := redisstore.New(ctx, redisstore.Options{URL: c.URL(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	owner := func(b int) *redisserver.Node {
		n, err := c.SlotOwner(ctx, keySlot(fmt.Sprintf("{%sb%d}", prefix, b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A bucket on another primary than bucket 0's.
	full := 0
	for b := 1; b < 16 && full == 0; b++ {
		if owner(b) != owner(0) {
			full = b
		}
	}
	if full == 0 {
		t.Fatal("every bucket is on bucket 0's primary")
	}
	now := time.Now()
	for _, id := range []string{"t0", fmt.Sprintf("t-b%d", full)} { // t0: bucket 0
		if err := s.AddWebhook(ctx, store.Webhook{Ticket: id, ID: "msg_" + id, URL: "https://hooks.example/a", Due: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	n := owner(full)
	if _, err := c.Do(ctx, n, "CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Do(context.Background(), n, "CONFIG", "SET", "maxmemory", "0") })

	got, err := s.ClaimWebhooks(ctx, "replica-a", time.Minute, 10)
	if err != nil || len(got) != 1 || got[0].Ticket != "t0" {
		t.Fatalf("claimed %+v, %v; want bucket 0's delivery (t0), past bucket %d's refusal", got, err, full)
	}
	// A call in which no bucket that answered had anything due says why it claimed nothing.
	if got, err := s.ClaimWebhooks(ctx, "replica-a", time.Minute, 10); len(got) != 0 || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claimed %+v, %v; want nothing and ErrUnavailable (bucket %d at its maxmemory)", got, err, full)
	}
}
