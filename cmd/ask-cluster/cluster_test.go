package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestCluster starts the real thing — redis-server, the dev IdP, the demo source, the
// llm-stub, three askd processes sharing Redis and nginx round-robin in front of them — then
// runs the whole conformance suite through the gateway, and kills a replica mid-run.
func TestCluster(t *testing.T) {
	// Debug: FrozenReplica counts the asks each conversation accepted by their debug lines.
	c, st := startSuiteCluster(t, 1, Options{Env: []string{"DAS_LOG_LEVEL=debug"}})
	// The cluster keeps running: Wait (what `make ask-serve-cluster` blocks in) must not return
	// when a replica dies.
	waitCtx, stopWait := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() { waited <- c.Wait(waitCtx) }()
	defer stopWait()
	t.Run("Conformance", func(t *testing.T) { testConformance(t, c, st) })
	t.Run("LimitsAcrossReplicas", func(t *testing.T) { testLimitsAcrossReplicas(t, c, st.limits) })
	killed := -1
	t.Run("KillRunnerMidStream", func(t *testing.T) { killed = testKillRunner(t, c, false) })
	t.Run("KilledReplicaRestarts", func(t *testing.T) { testRestarted(t, c, killed, waited) })
	// Last: a frozen replica leaves nginx's failure marks behind, which would change the
	// round-robin order KillRunnerMidStream relies on.
	t.Run("FrozenReplica", func(t *testing.T) { testFrozenReplica(t, c) })
}

// TestClusterPhase2 is the conformance suite, behaviour checks included, through nginx in front
// of three replicas sharing Redis that run phase 2 (a branch per source — the one demo source —
// and divergence).
func TestClusterPhase2(t *testing.T) {
	testPhase2(t, 1, Options{})
}

// testPhase2 starts the cluster (o's store settings; the rest as every suite's) with its
// replicas in phase 2, runs the whole suite through nginx with the phase checks, every check
// run, then kills the replica running an ask once a source branch is open.
func testPhase2(t *testing.T, buckets int, o Options) {
	o.Phase = 2
	c, st := startSuiteCluster(t, buckets, o)
	cfg := suiteConfig(c, st)
	cfg.Phase2, cfg.Sources = true, []string{"demo"}
	runSuite(t, cfg)
	t.Run("KillRunnerMidStream", func(t *testing.T) { testKillRunner(t, c, true) })
}

// testRestarted: the replica killed mid-run is started again by the cluster, serves asks
// itself, and the cluster's Wait did not return.
func testRestarted(t *testing.T, c *Cluster, i int, waited <-chan error) {
	if i < 0 {
		t.Skip("no replica was killed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := waitFor(ctx, func() bool {
		select {
		case err := <-waited:
			t.Fatalf("the cluster's Wait returned when a replica died: %v", err)
		default:
		}
		return c.Restarts(i) > 0
	}); err != nil {
		t.Fatalf("replica %d was not restarted: %v", i+1, err)
	}
	if err := c.WaitReplicaReady(ctx, i); err != nil {
		t.Fatal(err)
	}
	cl := clientFor(t, ctx, c, c.ReplicaURLs[i], client.Options{})
	conv, err := cl.CreateConversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, out, err := cl.AskAndWait(ctx, conv.Id, "How many sev1 incidents did we have in 2026-Q2?"); err != nil || out.Kind != client.Answer {
		t.Errorf("an ask on the restarted replica: %v, %v", out.Kind, err)
	}
	select {
	case err := <-waited:
		t.Errorf("the cluster's Wait returned: %v", err)
	default:
	}
}

// suiteTargets are what the conformance suite needs of a cluster besides its gateway, as
// cmd/conformance --dev-stack gives them to one process: a verifying webhook receiver, which the
// replicas' allow-list admits over loopback and whose secret signs (webhookEnv, for
// Options.Env), and the settings of the limits group (limitsEnv, for Options.LimitsEnv), which
// are conformance.DevLimits.
type suiteTargets struct {
	hooks      conformance.WebhookConfig
	webhookEnv []string
	limits     conformance.Limits
	limitsEnv  []string
}

// newSuiteTargets starts the receiver (closed when t ends: register it before the cluster's
// Stop, so that the replicas stop first) and says the environment for a store of buckets
// buckets (1 on one Redis; store/redis.DefaultClusterBuckets on a Redis Cluster).
//
// DAS_ASK_MAX_TICKETS holds per bucket, as ceil(MAX_TICKETS / buckets) (docs/scale-out.md), and
// an identity meets its own bucket's: the limits group gets buckets × the suite's MaxTickets, so
// that what one identity meets is the MaxTickets the suite is told.
func newSuiteTargets(t *testing.T, buckets int) suiteTargets {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := webhooktest.Secret()
	rcv, err := conformance.NewWebhookReceiver(ln, "", secret)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	l := conformance.DevLimits()
	return suiteTargets{
		hooks: conformance.WebhookConfig{Receiver: rcv, Secrets: []string{secret}},
		webhookEnv: []string{
			"DAS_ASK_WEBHOOK_ALLOW=" + rcv.URL() + "/ask-conformance/", "DAS_ASK_WEBHOOK_SECRETS=" + secret,
			"DAS_ASK_WEBHOOK_ALLOW_ADDRS=127.0.0.0/8,::1/128",
		},
		limits: l,
		limitsEnv: []string{
			"DAS_ASK_MAX_BODY_BYTES=" + strconv.FormatInt(l.MaxBodyBytes, 10),
			"DAS_ASK_MAX_INFLIGHT_PER_ID=" + strconv.Itoa(l.MaxInFlight),
			"DAS_ASK_MAX_TICKETS=" + strconv.Itoa(l.MaxTickets*buckets),
			"DAS_ASK_REDIS_BUCKETS=" + strconv.Itoa(buckets),
			"DAS_ASK_DEADLINE_S=" + strconv.Itoa(int(l.Deadline/time.Second)),
			"DAS_ASK_TTL_S=" + strconv.Itoa(int(l.TTL/time.Second)),
		},
	}
}

// testConformance: the whole suite, behaviour checks included, through nginx in front of the
// three replicas (the overflow check through nginx in front of two replicas with a buffer of 8,
// the limits checks through nginx in front of two replicas with st's limits, the webhook checks
// with st's receiver); every replica must have run some of its asks (no stickiness), and every
// check must have run.
func testConformance(t *testing.T, c *Cluster, st suiteTargets) {
	runSuite(t, suiteConfig(c, st))
	for i, p := range c.replicas {
		// Lines of asks this replica admitted: not those it ended for another (admitted_elsewhere).
		l := p.proc().log()
		if n := bytes.Count(l, []byte(`"msg":"ask finished"`)) - bytes.Count(l, []byte(`"admitted_elsewhere":true`)); n == 0 {
			t.Errorf("replica %d accepted no ask: the gateway is not spreading requests", i+1)
		}
	}
}

// testKillRunner: SIGKILL the replica running an ask while its first model turn is silent; a
// client reading through the gateway reconnects to another replica (Last-Event-ID), sees no
// gap and no duplicate, and receives error{interrupted} then exactly one done within the
// lease; the conversation is free for the next ask, and no ticket is left running.
//
// In phase 2 the kill comes once a source branch is open, and the replica that ends the run
// closes every branch the log holds open before error{interrupted}.
func testKillRunner(t *testing.T, c *Cluster, phase2 bool) int {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var clientLog logtest.Buffer
	cl := clientFor(t, ctx, c, c.GatewayURL, client.Options{
		Logger:      slog.New(slog.NewTextHandler(&clientLog, nil)),
		Reconnect:   client.Reconnect{Initial: 100 * time.Millisecond, Max: time.Second, Attempts: 20},
		IdleTimeout: 5 * time.Second,
	})
	conv, ticket := askSlow(t, ctx, cl)
	runner, err := c.Runner(ctx, ticket)
	if err != nil {
		t.Fatal(err)
	}
	// Put the stream on the runner, so that the kill cuts it: nginx (one worker, nothing else
	// in flight) hands requests to the replicas in turn, and the ask just went to the runner,
	// so after one request to each other replica the stream's request goes to the runner. The
	// reconnect is asserted below, so a gateway that balanced otherwise fails the test rather
	// than passing it without a reconnect.
	for range len(c.ReplicaURLs) - 1 {
		if _, err := cl.Status(ctx, ticket, 0); err != nil {
			t.Fatal(err)
		}
	}

	var read streamRead
	var killedAt, doneAt time.Time
	open := map[string]bool{}
	for ev, err := range cl.Events(ctx, ticket, client.EventsOptions{}) {
		if err != nil {
			t.Fatalf("stream through the gateway: %v (events so far %v)", err, read.kinds)
		}
		read.add(ev)
		if b, ok := ev.Value.(gen.BranchEvent); ok {
			if b.State == gen.BranchEventStateOpen {
				open[b.BranchId] = true
			} else {
				delete(open, b.BranchId)
			}
		}
		if e, ok := ev.Value.(gen.ErrorEvent); ok && e.Kind == gen.ErrorKindInterrupted && len(open) > 0 {
			t.Errorf("error{interrupted} with branches still open: %v", open)
		}
		b, isBranch := ev.Value.(gen.BranchEvent)
		if killedAt.IsZero() && isBranch && (!phase2 || b.Role == "source") {
			// The supervisor branch is open and the model's first turn is silent for 3 s.
			c.Kill(runner)
			killedAt = time.Now()
		}
		if ev.IsDone() {
			doneAt = time.Now()
		}
	}
	if killedAt.IsZero() {
		t.Fatalf("the run ended before the kill: %v", read.kinds)
	}
	if !read.gapless() {
		t.Fatalf("seqs %v: a gap or a duplicate across the reconnect", read.seqs)
	}
	if n := strings.Count(clientLog.String(), "event stream reconnecting"); n == 0 {
		t.Errorf("the client never reconnected: the kill did not cut its stream (log: %s)", clientLog.String())
	} else if !phase2 && !strings.Contains(clientLog.String(), "after=2") {
		t.Errorf("the client did not resume after seq 2 (Last-Event-ID): %s", clientLog.String())
	}
	if got := read.String(); !strings.HasSuffix(got, "branch error{interrupted} done") || read.dones != 1 {
		t.Errorf("events %s, want ... branch error{interrupted} done, exactly one done", got)
	}
	took := doneAt.Sub(killedAt)
	t.Logf("killed replica %d; error{interrupted} and done %v later (lease %v); events %v; client: %s", runner+1, took.Round(time.Millisecond), testLease, read.kinds, strings.TrimSpace(clientLog.String()))
	if bound := testLease + testLease/2 + time.Second; took > bound {
		t.Errorf("the interrupted run ended %v after the kill, want within %v", took, bound)
	}

	st, err := cl.Status(ctx, ticket, 0)
	if err != nil || st.State != gen.AskStateError {
		t.Errorf("status after the interruption: %+v, %v", st, err)
	}
	// The conversation is free again and the survivors answer.
	_, out, err := cl.AskAndWait(ctx, conv, "How many sev1 incidents did we have in 2026-Q2?")
	if err != nil || out.Kind != client.Answer {
		t.Errorf("the next ask in the conversation: %+v, %v", out.Kind, err)
	}
	if n, err := runningTickets(ctx, c); err != nil || n != 0 {
		t.Errorf("tickets left running in Redis: %d (%v)", n, err)
	}
	return runner
}

// clientFor is a client of url (the gateway or one replica) for identity A, with a fresh token
// from the cluster's IdP; opts.Token is set here.
func clientFor(t *testing.T, ctx context.Context, c *Cluster, url string, opts client.Options) *client.Client {
	t.Helper()
	tok, err := conformance.IdPTokens{URL: c.IdPURL}.Token(ctx, conformance.A, conformance.Valid)
	if err != nil {
		t.Fatal(err)
	}
	opts.Token = client.StaticToken(tok)
	cl, err := client.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
